/**
 * The governed proxy's memory over many calls, started with the sidecar's V8 flags: RSS and heap
 * in use after 1 %, 10 %, 25 %, 50 % and all of `calls` (the memory test's mix: every fourth call
 * a stream, every other one a new envelope), and each RSS over the first's.
 *
 *   node test/bench/rss-over-calls.ts [calls=200000] [connections=64]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent } from 'undici';
import { SIDECAR_NODE_FLAGS } from '../../proxy/node-flags.ts';
import { killChildren, mixedCalls, proxyStats, rssMb, startChild, startGovernedProxy } from './children.ts';

const total = Number(process.argv[2] ?? 200_000);
const connections = Number(process.argv[3] ?? 64);
const checkpoints = [0.01, 0.1, 0.25, 0.5, 1].map((f) => Math.max(1, Math.round(total * f)));

const dataDir = mkdtempSync(join(tmpdir(), 'bench-rss-'));
const [, upstream] = await startChild<{ port: number }>('fast-upstream.ts', []);
const [proxy, { port }] = await startGovernedProxy({
  upstream: `http://127.0.0.1:${upstream.port}`,
  dataDir,
  policies: 100,
});
const url = `http://127.0.0.1:${port}/openai/v1/chat/completions`;
const agent = new Agent({ connections });
const mb = (bytes: number) => (bytes / 1024 / 1024).toFixed(1);

console.log(
  `node ${process.version} ${SIDECAR_NODE_FLAGS.join(' ')}, ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, load average ${loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')}; ${connections} connections, every fourth call a stream, every other one a new envelope`,
);
console.log(`\n| calls | RSS (MB) | × RSS after ${checkpoints[0]!.toLocaleString('en-US')} | heap used (MB) | req/s |`);
console.log('|---:|---:|---:|---:|---:|');
let done = 0;
let first = 0;
for (const at of checkpoints) {
  const started = performance.now();
  await mixedCalls(url, agent, done, at, connections);
  const rate = ((at - done) / (performance.now() - started)) * 1000;
  done = at;
  const rss = rssMb(proxy);
  first ||= rss;
  const { heapUsed } = await proxyStats(proxy);
  console.log(
    `| ${at.toLocaleString('en-US')} | ${rss.toFixed(1)} | ${(rss / first).toFixed(2)} | ${mb(heapUsed)} | ${Math.round(rate).toLocaleString('en-US')} |`,
  );
}
await agent.close();
killChildren();
rmSync(dataDir, { recursive: true, force: true });
