import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killChildren, mixedCalls, proxyStats, startChild, startGovernedProxy } from '../bench/children.ts';

/** Heap growth allowed between 2,000 and 20,000 calls, after a full GC each time. */
const MARGIN_BYTES = 6 * 1024 * 1024;

const dataDir = mkdtempSync(join(tmpdir(), 'svc-memory-'));
let proxy: ChildProcess;
let url: string;
const agent = new Agent({ connections: 16 });

beforeAll(async () => {
  const [, upstream] = await startChild<{ port: number }>('fast-upstream.ts', []);
  const [child, { port }] = await startGovernedProxy({
    upstream: `http://127.0.0.1:${upstream.port}`,
    dataDir,
    policies: 50,
    envelopes: 1000,
  });
  proxy = child;
  url = `http://127.0.0.1:${port}/openai/v1/chat/completions`;
}, 60_000);

afterAll(async () => {
  await agent.close();
  killChildren();
  rmSync(dataDir, { recursive: true, force: true });
});

const calls = (from: number, to: number) => mixedCalls(url, agent, from, to, 16);

describe('proxy memory over many calls', () => {
  it('the heap after GC does not grow from 2,000 to 20,000 calls beyond a fixed margin', async () => {
    await calls(0, 2000);
    const warm = await proxyStats(proxy, true);
    await calls(2000, 20_000);
    const after = await proxyStats(proxy, true);
    expect(after.heapUsed - warm.heapUsed, `heap ${warm.heapUsed} → ${after.heapUsed} bytes`).toBeLessThan(
      MARGIN_BYTES,
    );
  }, 600_000);
});
