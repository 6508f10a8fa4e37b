import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GovernedProxyStats } from '../bench/governed-proxy.ts';

const BENCH = new URL('../bench/', import.meta.url).pathname;
/** Heap growth allowed between 2,000 and 20,000 calls, after a full GC each time. */
const MARGIN_BYTES = 6 * 1024 * 1024;

const children: ChildProcess[] = [];
const dataDir = mkdtempSync(join(tmpdir(), 'svc-memory-'));

async function start<T>(script: string, args: string[], execArgv: string[] = []): Promise<[ChildProcess, T]> {
  const child = fork(join(BENCH, script), args, { execArgv, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  children.push(child);
  const [message] = (await once(child, 'message')) as [T];
  return [child, message];
}

async function stats(proxy: ChildProcess): Promise<GovernedProxyStats> {
  const answer = once(proxy, 'message');
  proxy.send('stats');
  return (await answer)[0] as GovernedProxyStats;
}

let proxy: ChildProcess;
let url: string;
const agent = new Agent({ connections: 16 });

beforeAll(async () => {
  const [, upstream] = await start<{ port: number }>('fast-upstream.ts', []);
  [proxy, { port: url }] = await start<{ port: string }>(
    'governed-proxy.ts',
    [JSON.stringify({ upstream: `http://127.0.0.1:${upstream.port}`, dataDir, policies: 50, envelopes: 1000 })],
    ['--expose-gc'],
  );
  url = `http://127.0.0.1:${url}/openai/v1/chat/completions`;
}, 60_000);

afterAll(async () => {
  await agent.close();
  for (const child of children) child.kill('SIGKILL');
  rmSync(dataDir, { recursive: true, force: true });
});

/** Call `i`: every fourth a stream, every other one a new execution (a new envelope). */
async function call(i: number): Promise<void> {
  const stream = i % 4 === 0;
  const res = await request(url, {
    method: 'POST',
    dispatcher: agent,
    headers: {
      'content-type': 'application/json',
      authorization: 'Bearer sk-bench',
      ...(i % 2 === 0 ? { 'x-svc-execution-id': `exec-${i}` } : {}),
    },
    body: JSON.stringify({
      model: 'gpt-4o-mini',
      max_tokens: 32,
      stream,
      messages: [{ role: 'user', content: `call ${i}` }],
    }),
  });
  const text = await res.body.text();
  if (res.statusCode !== 200) throw new Error(`call ${i}: ${res.statusCode} ${text}`);
}

async function calls(from: number, to: number): Promise<void> {
  let next = from;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < to) await call(next++);
    }),
  );
}

describe('proxy memory over many calls', () => {
  it('the heap after GC does not grow from 2,000 to 20,000 calls beyond a fixed margin', async () => {
    await calls(0, 2000);
    const warm = await stats(proxy);
    await calls(2000, 20_000);
    const after = await stats(proxy);
    expect(after.heapUsed - warm.heapUsed, `heap ${warm.heapUsed} → ${after.heapUsed} bytes`).toBeLessThan(
      MARGIN_BYTES,
    );
  }, 600_000);
});
