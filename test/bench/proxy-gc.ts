/**
 * What the collector does per call in the governed proxy: the fast upstream and the proxy (with
 * the sidecar's V8 flags and `--trace-gc --trace-gc-nvp`, its trace on this process's stdout) in
 * processes of their own, `calls` streamed (or whole) calls through the reverse route on
 * `connections` keep-alive connections after a warm-up. The calls are marked as a drain's two
 * halves are, so `gc-promoted.ts` reads the trace: scavenges, the bytes they promoted to the old
 * generation and the pauses, per half. Prints figures; not a test.
 *
 *   node test/bench/proxy-gc.ts [calls=8000] [connections=16] [answer=stream|whole] [warm-up calls=5000] \
 *     | node test/bench/gc-promoted.ts
 */
import { mkdtempSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent } from 'undici';
import { chatBody, killChildren, postCalls, startChild, startGovernedProxy } from './children.ts';

const calls = Number(process.argv[2] ?? 8000);
const connections = Number(process.argv[3] ?? 16);
const answer = process.argv[4] ?? 'stream';
const warmUp = Number(process.argv[5] ?? 5000);

const [, { port: upstreamPort }] = await startChild<{ port: number }>('fast-upstream.ts', []);
const [, { port }] = await startGovernedProxy(
  {
    upstream: `http://127.0.0.1:${upstreamPort}`,
    dataDir: mkdtempSync(join(tmpdir(), 'bench-proxy-gc-')),
    policies: 100,
  },
  ['--trace-gc', '--trace-gc-nvp'],
);
const url = `http://127.0.0.1:${port}/openai/v1/chat/completions`;
const body = chatBody(answer === 'stream');

async function drive(n: number): Promise<void> {
  const agent = new Agent({ connections });
  await postCalls(url, agent, connections, n, body);
  await agent.close();
}

await drive(warmUp);
// The trace of what the warm-up left to collect reaches stdout before the mark.
await sleep(200);
console.log(`drain: starts, ${calls / 2} calls each half, ${answer}, ${connections} connections`);
await drive(calls / 2);
console.log('drain: second half');
await drive(calls / 2);
await sleep(200);
console.log('drain: ends');
killChildren();
