/**
 * Where the serving process's CPU time per call goes, thread by thread: the fast upstream and the
 * governed proxy (or the bare relay) in processes of their own, streamed (or whole) calls through
 * the proxy's reverse route on `connections` keep-alive connections, after a warm-up, in rounds.
 * Each round prints the rate, the process's CPU time per call (/proc, 10 ms ticks) split into its
 * main thread (and the system time within it) and V8's worker threads (parallel scavenges,
 * concurrent marking and compilation), and the upstream's CPU time per call beside it: a server
 * that does almost nothing, whose own cost per call shows what the machine charges every process
 * for a call at that concurrency.
 *
 *   node test/bench/thread-cpu.ts [calls per round=5000] [connections=1] [rounds=3]
 *     [target=proxy|relay] [answer=stream|whole] [warm-up calls=2000]
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent } from 'undici';
import { chatBody, killChildren, postCalls, startChild, startGovernedProxy } from './children.ts';

const calls = Number(process.argv[2] ?? 5000);
const connections = Number(process.argv[3] ?? 1);
const rounds = Number(process.argv[4] ?? 3);
const target = process.argv[5] ?? 'proxy';
const stream = (process.argv[6] ?? 'stream') === 'stream';
const warmUp = Number(process.argv[7] ?? 2000);

/** User and system time of a process or thread, in µs, from its stat file (100 ticks per second). */
function times(statPath: string): { user: number; system: number } {
  const fields = readFileSync(statPath, 'utf8').split(') ')[1]?.split(' ') ?? [];
  return { user: Number(fields[11]) * 10_000, system: Number(fields[12]) * 10_000 };
}

/** CPU time by thread name, the process's main thread as 'main' (its system time apart). */
function threadTimes(pid: number): Map<string, number> {
  const byName = new Map<string, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    const { user, system } = times(`/proc/${pid}/task/${tid}/stat`);
    const name = tid === String(pid) ? 'main' : readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim();
    byName.set(name, (byName.get(name) ?? 0) + user + system);
    if (name === 'main') byName.set('main system', system);
  }
  return byName;
}

const body = chatBody(stream);

async function drive(url: string, n: number): Promise<void> {
  const agent = new Agent({ connections });
  await postCalls(url, agent, connections, n, body);
  await agent.close();
}

const dataDir = mkdtempSync(join(tmpdir(), 'bench-thread-cpu-'));
const [upstream, { port: upstreamPort }] = await startChild<{ port: number }>('fast-upstream.ts', []);
const upstreamUrl = `http://127.0.0.1:${upstreamPort}`;
const [server, { port }] =
  target === 'relay'
    ? await startChild<{ port: number }>('bare-relay.ts', [upstreamUrl])
    : await startGovernedProxy({ upstream: upstreamUrl, dataDir, policies: 100 });
const url = `http://127.0.0.1:${port}${target === 'relay' ? '' : '/openai'}/v1/chat/completions`;
const perCall = (micros: number) => (micros / calls).toFixed(0);

console.log(`${target}, ${stream ? 'streams' : 'whole answers'}, ${connections} connection(s), µs per call`);
await drive(url, warmUp);
for (let round = 0; round < rounds; round++) {
  const before = threadTimes(server.pid!);
  const upstreamBefore = times(`/proc/${upstream.pid}/stat`);
  const started = process.hrtime.bigint();
  await drive(url, calls);
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const after = threadTimes(server.pid!);
  const upstreamAfter = times(`/proc/${upstream.pid}/stat`);
  const spent = [...after].map(([name, micros]) => [name, micros - (before.get(name) ?? 0)] as const);
  const total = spent.filter(([name]) => name !== 'main system').reduce((sum, [, micros]) => sum + micros, 0);
  const threads = spent
    .filter(([name, micros]) => micros > 0 || name.startsWith('main'))
    .map(([name, micros]) => `${name} ${perCall(micros)}`);
  const upstreamCpu = upstreamAfter.user + upstreamAfter.system - upstreamBefore.user - upstreamBefore.system;
  console.log(
    `round ${round}: ${(calls / seconds).toFixed(0)} calls/s, CPU ${perCall(total)} (${threads.join(', ')}), upstream ${perCall(upstreamCpu)}, load average ${loadavg()[0]!.toFixed(1)}`,
  );
}
killChildren();
rmSync(dataDir, { recursive: true, force: true });
process.exit(0);
