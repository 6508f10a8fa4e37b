/**
 * The processes the benchmarks and the memory test start: the fast upstream, the bare relay and
 * the governed proxy, each forked from this folder and ready once it sent its first message.
 * Every child started here is killed when the parent exits.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { request, type Agent } from 'undici';
import { SIDECAR_ENV, SIDECAR_NODE_FLAGS } from '../../proxy/node-flags.ts';
import type { GovernedProxyOptions, GovernedProxyStats } from './governed-proxy.ts';

const started: ChildProcess[] = [];
process.on('exit', () => killChildren());

export async function startChild<T>(
  script: string,
  args: string[],
  execArgv: string[] = [],
  env: NodeJS.ProcessEnv = process.env,
): Promise<[ChildProcess, T]> {
  const child = fork(join(import.meta.dirname, script), args, {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    execArgv,
    env,
  });
  started.push(child);
  const [message] = (await Promise.race([
    once(child, 'message'),
    once(child, 'exit').then(([code]) =>
      Promise.reject(new Error(`${script} exited (${String(code)}) before it was ready`)),
    ),
  ])) as [T];
  return [child, message];
}

/** The governed proxy, started with the sidecar's V8 flags (and `execArgv` after them) and environment. */
export function startGovernedProxy(
  options: GovernedProxyOptions,
  execArgv: string[] = [],
): Promise<[ChildProcess, { port: number; caPem: string }]> {
  return startChild('governed-proxy.ts', [JSON.stringify(options)], [...SIDECAR_NODE_FLAGS, ...execArgv], {
    ...process.env,
    ...SIDECAR_ENV,
  });
}

/** The proxy's memory, after a full GC when `collect`. */
export async function proxyStats(proxy: ChildProcess, collect = false): Promise<GovernedProxyStats> {
  const answer = once(proxy, 'message');
  proxy.send(collect ? 'stats after gc' : 'stats');
  return (await answer)[0] as GovernedProxyStats;
}

export function killChildren(): void {
  for (const child of started.splice(0)) child.kill('SIGKILL');
}

/** CPU time a process has used (user + system), in µs, from /proc (Linux; 100 ticks per second). */
export function cpuMicros(child: ChildProcess): number {
  const fields = readFileSync(`/proc/${child.pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}

/**
 * CPU time a process's threads have used, in ns, as the scheduler counts it (Linux schedstat): finer
 * than `cpuMicros`'s ticks, but without the time of threads that have exited.
 */
export function cpuNanos(child: ChildProcess): number {
  let sum = 0;
  for (const tid of readdirSync(`/proc/${child.pid}/task`))
    sum += Number(readFileSync(`/proc/${child.pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
  return sum;
}

/** Resident set of a process, in MB, from /proc (Linux). */
export function rssMb(child: ChildProcess): number {
  const line = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'));
  return Number(line?.[1] ?? NaN) / 1024;
}

/**
 * Calls `from` to `to` (exclusive) through the proxy's reverse route, `connections` at a time:
 * every fourth a stream, every other one a new execution (so a new envelope).
 */
export async function mixedCalls(
  url: string,
  agent: Agent,
  from: number,
  to: number,
  connections: number,
): Promise<void> {
  let next = from;
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (next < to) await mixedCall(url, agent, next++);
    }),
  );
}

async function mixedCall(url: string, agent: Agent, i: number): Promise<void> {
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
      stream: i % 4 === 0,
      messages: [{ role: 'user', content: `call ${i}` }],
    }),
  });
  const text = await res.body.text();
  if (res.statusCode !== 200) throw new Error(`call ${i}: ${res.statusCode} ${text}`);
}

/** The bench's chat request, streamed or whole. */
export const chatBody = (stream: boolean): string =>
  JSON.stringify({ model: 'gpt-4o-mini', max_tokens: 64, stream, messages: [{ role: 'user', content: 'hi' }] });

/** `n` calls posting `body` to `url`, `connections` at a time over `dispatcher`; a status other than 200 throws. */
export async function postCalls(
  url: string,
  dispatcher: Agent,
  connections: number,
  n: number,
  body: string,
): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (next < n) {
        next++;
        const res = await request(url, {
          method: 'POST',
          dispatcher,
          headers: { 'content-type': 'application/json', authorization: 'Bearer sk-bench' },
          body,
        });
        const text = await res.body.text();
        if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}: ${text}`);
      }
    }),
  );
}
