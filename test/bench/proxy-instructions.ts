/**
 * The work of a governed call, apart from the machine's load: the fast upstream, the governed
 * proxy (as `governed-proxy.ts` builds it: 100 policies, the budget lease, the outbox into LMDB)
 * and an undici client all in this one process, `calls` streamed and then `calls` whole calls
 * through the proxy's reverse route on `connections` keep-alive connections, after a warm-up of
 * each. Prints the process's CPU time per call (`process.cpuUsage`: user and system, every
 * thread). Everything the process does counts (client and upstream too), so compare builds with
 * it, not with the bare relay's figures.
 *
 * Under callgrind, it counts the instructions of each measured window alone:
 *
 *   export CALLGRIND_OUT=/tmp/proxy-calls.%p
 *   valgrind --tool=callgrind --smc-check=all-non-file --instr-atstart=no \
 *     --callgrind-out-file=$CALLGRIND_OUT node test/bench/proxy-instructions.ts 300
 *
 * The script turns the instrumentation on around each window with `callgrind_control -i on`
 * (vgdb reaches the process while it waits in the event loop), dumps the window's counts with
 * `callgrind_control -d` and reads their total back, and prints instructions per call (the
 * instructions of every thread: V8's compiler and collector threads included).
 *
 *   node --max-semi-space-size=16 --heap-growing-percent=100 \
 *     test/bench/proxy-instructions.ts [calls=3000] [connections=1] [warm-up calls=500]
 *
 * (the sidecar's V8 flags, `proxy/node-flags.ts`, as the proxy runs with them).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { Agent } from 'undici';
import { chatBody, postCalls } from './children.ts';
import { startFastUpstream } from './fast-upstream.ts';
import { governedProxy } from './governed-proxy.ts';

const calls = Number(process.argv[2] ?? 3000);
const connections = Number(process.argv[3] ?? 1);
const warmUp = Number(process.argv[4] ?? 500);
/** Valgrind preloads its own libraries into the program it runs. */
const underValgrind = (process.env.LD_PRELOAD ?? '').includes('vgpreload');
const run = promisify(execFile);

const callgrind = (...args: string[]) => run('callgrind_control', [...args, String(process.pid)]);

/** The newest dump callgrind wrote for this process: its total of instructions. */
function lastDumpTotal(): number {
  const outFile = callgrindOutFile();
  const dir = dirname(outFile);
  const base = outFile.slice(dir.length + 1);
  const dumps = readdirSync(dir)
    .filter((name) => name.startsWith(`${base}.`))
    .sort((a, b) => Number(a.split('.').pop()) - Number(b.split('.').pop()));
  const last = dumps.at(-1);
  if (last === undefined) throw new Error(`no callgrind dump beside ${outFile}`);
  const totals = /^totals: (\d+)/m.exec(readFileSync(join(dir, last), 'utf8'));
  return Number(totals?.[1] ?? NaN);
}

/**
 * Where callgrind writes for this process: valgrind's own options are not in the program's
 * command line, so its `--callgrind-out-file` is repeated in CALLGRIND_OUT (`%p` for the pid).
 */
function callgrindOutFile(): string {
  const file = process.env.CALLGRIND_OUT ?? 'callgrind.out.%p';
  return resolve(file.replaceAll('%p', String(process.pid)));
}

const upstream = await startFastUpstream();
const dataDir = mkdtempSync(join(tmpdir(), 'bench-proxy-instructions-'));
const proxy = await governedProxy({
  upstream: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`,
  dataDir,
  policies: 100,
});
const url = `http://127.0.0.1:${proxy.port}/openai/v1/chat/completions`;
const agent = new Agent({ connections });

const drive = (n: number, stream: boolean) => postCalls(url, agent, connections, n, chatBody(stream));

console.log(
  `${calls} calls a kind on ${connections} connection(s), upstream, proxy and client in one process${underValgrind ? ', under callgrind' : ''}`,
);
for (const stream of [true, false]) {
  await drive(warmUp, stream);
  if (underValgrind) {
    await callgrind('-z');
    await callgrind('-i', 'on');
  }
  const cpu = process.cpuUsage();
  await drive(calls, stream);
  const spent = process.cpuUsage(cpu);
  let instructions = '';
  if (underValgrind) {
    await callgrind('-i', 'off');
    await callgrind('-d', stream ? 'streams' : 'whole');
    instructions = `, ${(lastDumpTotal() / calls / 1000).toFixed(0)} k instructions per call`;
  }
  console.log(
    `${stream ? 'streams' : 'whole answers'}: ${((spent.user + spent.system) / calls).toFixed(0)} µs CPU per call${instructions}, load average ${loadavg()[0]!.toFixed(2)}`,
  );
}
await agent.close();
await proxy.close();
upstream.close();
rmSync(dataDir, { recursive: true, force: true });
