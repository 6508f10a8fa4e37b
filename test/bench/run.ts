/**
 * `npm run bench`: the proxy beside a bare relay in one run, then the micro-benchmarks.
 *
 * Starts, each in a process of its own: a fast upstream (`fast-upstream.ts`), a bare undici relay
 * in front of it (`bare-relay.ts`) and the whole governed proxy (`governed-proxy.ts`: policy,
 * budget lease, token counting, events to the outbox). Drives each with keep-alive requests, whole
 * and streamed, through the relay, the proxy's reverse route and the proxy by CONNECT with TLS
 * interception, and prints one table: req/s at each concurrency, its ratio to the relay and the
 * serving process's CPU time per call (/proc), latency and CPU time per call at one connection
 * (relay and proxy requests alternating) and what the proxy adds at p50 and p99, first-byte time
 * of streams, and RSS idle, after the calls, with open slow streams and a while after they ended.
 * Each case at 16 and 64 connections is measured after a warm-up that lasts until the serving
 * process's CPU time per call agrees between two successive slices (`warmUp`, the same rule for
 * relay and proxy); a second table gives each case's first half beside its second, and the
 * warm-up requests it took.
 * Then runs the policy evaluation, governed hot path, stream meter, memory over many calls,
 * envelope creation and event processor benchmarks.
 *
 *   node test/bench/run.ts [requests per case=3000] [open streams=1000] [micro=full|small|none]
 *     [seconds after the streams ended=10]
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, ProxyAgent, request, type Dispatcher } from 'undici';
import { cpuMicros, cpuNanos, killChildren, rssMb, startChild, startGovernedProxy } from './children.ts';

const perCase = Number(process.argv[2] ?? 3000);
const openStreams = Number(process.argv[3] ?? 1000);
const micro = process.argv[4] ?? 'full';
const settleSeconds = Number(process.argv[5] ?? 10);
const HERE = import.meta.dirname;
const CONCURRENCY = [16, 64];
const WARM_UP = { slice: 1000, tolerance: 0.05, slices: 10 };

interface Target {
  name: string;
  url: string;
  dispatcher: (connections: number) => Dispatcher;
  /** The process serving it, whose CPU time per call is reported. */
  server: ChildProcess;
}

const body = (stream: boolean) =>
  JSON.stringify({ model: 'gpt-4o-mini', max_tokens: 64, stream, messages: [{ role: 'user', content: 'hi there' }] });

/** One request; resolves with the total and the first-byte time in µs. */
async function one(
  target: Target,
  dispatcher: Dispatcher,
  stream: boolean,
  headers: Record<string, string> = {},
): Promise<{ total: number; first: number }> {
  const started = process.hrtime.bigint();
  const res = await request(target.url, {
    method: 'POST',
    dispatcher,
    headers: { 'content-type': 'application/json', authorization: 'Bearer sk-bench', ...headers },
    body: body(stream),
  });
  let first = 0;
  for await (const _ of res.body) first ||= Number(process.hrtime.bigint() - started) / 1000;
  if (res.statusCode !== 200) throw new Error(`${target.name}: status ${res.statusCode}`);
  return { total: Number(process.hrtime.bigint() - started) / 1000, first };
}

interface Slice {
  rate: number;
  cpu: number;
}

/** `n` requests, `connections` at a time; `atMiddle` runs as the middle one is sent. */
async function drive(
  target: Target,
  dispatcher: Dispatcher,
  stream: boolean,
  connections: number,
  n: number,
  atMiddle = () => {},
): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (next < n) {
        if (next++ === n >> 1) atMiddle();
        await one(target, dispatcher, stream);
      }
    }),
  );
}

/**
 * Requests in slices of `WARM_UP.slice` (or of the case's size when smaller) until the server's CPU
 * time per request in one slice is within `WARM_UP.tolerance` of the slice before, at most
 * `WARM_UP.slices` of them; the same rule for every target. A fixed 200 requests left the first cases
 * of each process measuring code V8 had not yet optimized. Returns how many requests it took.
 */
async function warmUp(
  target: Target,
  dispatcher: Dispatcher,
  stream: boolean,
  connections: number,
  n: number,
): Promise<number> {
  const size = Math.min(n, WARM_UP.slice);
  let previous = NaN;
  for (let slice = 1; slice <= WARM_UP.slices; slice++) {
    const before = cpuNanos(target.server);
    await drive(target, dispatcher, stream, connections, size);
    const perCall = (cpuNanos(target.server) - before) / size;
    if (Math.abs(perCall - previous) <= WARM_UP.tolerance * previous) return slice * size;
    previous = perCall;
  }
  return WARM_UP.slices * size;
}

/**
 * Requests per second, and the server's CPU time per request in µs, over `n` requests after a
 * warm-up; and the same for the first and the second half of those requests apart, split when the
 * middle request is sent.
 */
async function throughput(
  target: Target,
  stream: boolean,
  connections: number,
  n: number,
): Promise<Slice & { halves: [Slice, Slice]; warmUp: number }> {
  const dispatcher = target.dispatcher(connections);
  const warmed = await warmUp(target, dispatcher, stream, connections, n);
  let middle = { cpu: 0, at: 0n };
  const cpuBefore = cpuMicros(target.server);
  const started = process.hrtime.bigint();
  await drive(target, dispatcher, stream, connections, n, () => {
    middle = { cpu: cpuMicros(target.server), at: process.hrtime.bigint() };
  });
  const ended = process.hrtime.bigint();
  const cpuAfter = cpuMicros(target.server);
  await dispatcher.close();
  const slice = (calls: number, from: bigint, to: bigint, cpu: number) => ({
    rate: calls / (Number(to - from) / 1e9),
    cpu: cpu / calls,
  });
  const half = n >> 1;
  return {
    ...slice(n, started, ended, cpuAfter - cpuBefore),
    halves: [
      slice(half, started, middle.at, middle.cpu - cpuBefore),
      slice(n - half, middle.at, ended, cpuAfter - middle.cpu),
    ],
    warmUp: warmed,
  };
}

const pct = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;

const sorted = (xs: number[]) => xs.sort((u, v) => u - v);

/**
 * One connection each, relay and proxy requests alternating, so load from elsewhere hits both alike;
 * the target's CPU time per call and p50 also for the first and the second half of the pairs apart.
 */
async function latency(relay: Target, target: Target, stream: boolean, n: number) {
  const a = relay.dispatcher(1);
  const b = target.dispatcher(1);
  const r: { total: number; first: number }[] = [];
  const p: { total: number; first: number }[] = [];
  let cpuBefore = 0;
  let cpuMiddle = 0;
  for (let i = 0; i < n + 100; i++) {
    if (i === 100) cpuBefore = cpuMicros(target.server);
    if (i === 100 + (n >> 1)) cpuMiddle = cpuMicros(target.server);
    const x = await one(relay, a, stream);
    const y = await one(target, b, stream);
    if (i < 100) continue;
    r.push(x);
    p.push(y);
  }
  // The target's CPU time over the calls it served: both of each pair when it is the relay itself.
  const cpuAfter = cpuMicros(target.server);
  const served = target === relay ? 2 : 1;
  const half = n >> 1;
  const cpu = (cpuAfter - cpuBefore) / (served * n);
  const cpuHalves = [(cpuMiddle - cpuBefore) / (served * half), (cpuAfter - cpuMiddle) / (served * (n - half))];
  const p50Halves = [p.slice(0, half), p.slice(half)].map((xs) => pct(sorted(xs.map((x) => x.total)), 50));
  await Promise.all([a.close(), b.close()]);
  const rt = sorted(r.map((x) => x.total));
  const pt = sorted(p.map((x) => x.total));
  const rf = sorted(r.map((x) => x.first));
  const pf = sorted(p.map((x) => x.first));
  return {
    p50: pct(pt, 50),
    cpu,
    addedP50: pct(pt, 50) - pct(rt, 50),
    addedP99: pct(pt, 99) - pct(rt, 99),
    firstByteAdded: pct(pf, 50) - pct(rf, 50),
    cpuHalves,
    p50Halves,
  };
}

/**
 * Opens `n` slow streams through the target (40 events 200 ms apart, about 8 s each), reports RSS
 * once each has delivered its first bytes, reads them all to their end and reports RSS again
 * `settleSeconds` later.
 */
async function rssWithOpenStreams(
  target: Target,
  process: ChildProcess,
  n: number,
): Promise<{ open: number; after: number }> {
  const dispatcher = target.dispatcher(n);
  let opened = 0;
  const { promise: allOpen, resolve } = Promise.withResolvers<void>();
  const streams = Array.from({ length: n }, async () => {
    const res = await request(target.url, {
      method: 'POST',
      dispatcher,
      headers: { 'content-type': 'application/json', 'x-bench-chunks': '40', 'x-bench-delay-ms': '200' },
      body: body(true),
    });
    let first = true;
    for await (const _ of res.body) {
      if (first && ++opened === n) resolve();
      first = false;
    }
  });
  const ended = Promise.all(streams);
  await Promise.race([allOpen, ended]);
  const open = rssMb(process);
  await ended;
  await dispatcher.close();
  await new Promise((r) => setTimeout(r, settleSeconds * 1000));
  return { open, after: rssMb(process) };
}

const fmt = (v: number, digits = 0) =>
  Number.isFinite(v)
    ? v.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })
    : '–';

async function main(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'bench-proxy-'));
  const [, upstream] = await startChild<{ port: number }>('fast-upstream.ts', []);
  const upstreamUrl = `http://127.0.0.1:${upstream.port}`;
  const [relayProcess, relayReady] = await startChild<{ port: number }>('bare-relay.ts', [upstreamUrl]);
  // With the sidecar's V8 flags, as the chart and `npm run proxy` start it.
  const [proxyProcess, proxyReady] = await startGovernedProxy({ upstream: upstreamUrl, dataDir, policies: 100 });
  await new Promise((r) => setTimeout(r, 1000));
  const idle = { relay: rssMb(relayProcess), proxy: rssMb(proxyProcess) };

  const relay: Target = {
    name: 'bare relay',
    url: `http://127.0.0.1:${relayReady.port}/v1/chat/completions`,
    dispatcher: (connections) => new Agent({ connections }),
    server: relayProcess,
  };
  const targets: Target[] = [
    relay,
    {
      name: 'proxy, reverse',
      url: `http://127.0.0.1:${proxyReady.port}/openai/v1/chat/completions`,
      dispatcher: (connections) => new Agent({ connections }),
      server: proxyProcess,
    },
    {
      name: 'proxy, CONNECT + TLS',
      url: 'https://api.openai.com/v1/chat/completions',
      dispatcher: (connections) =>
        new ProxyAgent({
          uri: `http://127.0.0.1:${proxyReady.port}`,
          requestTls: { ca: proxyReady.caPem },
          connections,
        }),
      server: proxyProcess,
    },
  ];

  console.log(
    `node ${process.version}, ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, load average ${loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}; ${perCase} requests per case; upstream answers at once (whole: one JSON; stream: 20 events + usage)`,
  );
  console.log(
    `\n| target | answer | ${CONCURRENCY.map((c) => `req/s @${c}`).join(' | ')} | ratio to relay | server CPU per call @${CONCURRENCY.join(' / @')} (µs) | p50 @1 (µs) | server CPU per call @1 (µs) | added p50 | added p99 | first byte added (p50) |`,
  );
  console.log(`|---|---|${CONCURRENCY.map(() => '---:').join('|')}|---:|---:|---:|---:|---:|---:|---:|`);
  let calls = 0;
  const halves: string[] = [];
  for (const stream of [false, true]) {
    const relayRates: number[] = [];
    for (const target of targets) {
      const runs: Awaited<ReturnType<typeof throughput>>[] = [];
      for (const c of CONCURRENCY) runs.push(await throughput(target, stream, c, perCase));
      const rates = runs.map((r) => r.rate);
      if (target === relay) relayRates.push(...rates);
      const lat = await latency(relay, target, stream, Math.max(50, Math.floor(perCase / 5)));
      // Every call the proxy served, its warm-ups included.
      if (target !== relay)
        calls += runs.reduce((sum, r) => sum + r.warmUp + perCase, 0) + 100 + Math.max(50, Math.floor(perCase / 5));
      const ratio = rates.map((r, i) => (r / relayRates[i]!).toFixed(2)).join(' / ');
      const self = target === relay;
      console.log(
        `| ${target.name} | ${stream ? 'stream' : 'whole'} | ${rates.map((r) => fmt(r)).join(' | ')} | ${self ? '1' : ratio} | ${runs.map((r) => fmt(r.cpu)).join(' / ')} | ${fmt(lat.p50)} | ${fmt(lat.cpu)} | ${self ? '–' : fmt(lat.addedP50)} | ${self ? '–' : fmt(lat.addedP99)} | ${stream && !self ? fmt(lat.firstByteAdded) : '–'} |`,
      );
      const pair = (xs: number[]) => xs.map((x) => fmt(x)).join(' → ');
      halves.push(
        `| ${target.name} | ${stream ? 'stream' : 'whole'} | ${runs.map((r) => pair(r.halves.map((h) => h.rate))).join(' | ')} | ${runs.map((r) => pair(r.halves.map((h) => h.cpu))).join(' | ')} | ${pair(lat.p50Halves)} | ${pair(lat.cpuHalves)} | ${runs.map((r) => fmt(r.warmUp)).join(' / ')} |`,
      );
    }
  }
  console.log(
    `\n| first half → second half | answer | ${CONCURRENCY.map((c) => `req/s @${c}`).join(' | ')} | ${CONCURRENCY.map((c) => `server CPU per call @${c} (µs)`).join(' | ')} | p50 @1 (µs) | server CPU per call @1 (µs) | warm-up requests @${CONCURRENCY.join(' / @')} |`,
  );
  console.log(`|---|---|${[...CONCURRENCY, ...CONCURRENCY, 1, 1, 1].map(() => '---:').join('|')}|`);
  for (const row of halves) console.log(row);
  const afterCalls = { relay: rssMb(relayProcess), proxy: rssMb(proxyProcess) };
  const streaming = {
    relay: await rssWithOpenStreams(relay, relayProcess, openStreams),
    proxy: await rssWithOpenStreams(targets[1]!, proxyProcess, openStreams),
  };
  console.log(
    `\n| RSS (MB) | idle | after ${fmt(calls)} proxied calls | with ${openStreams} open streams | ${settleSeconds} s after they ended |`,
  );
  console.log('|---|---:|---:|---:|---:|');
  for (const k of ['relay', 'proxy'] as const)
    console.log(
      `| ${k === 'relay' ? 'bare relay' : 'governed proxy'} | ${fmt(idle[k], 1)} | ${fmt(afterCalls[k], 1)} | ${fmt(streaming[k].open, 1)} | ${fmt(streaming[k].after, 1)} |`,
    );
  killChildren();
  rmSync(dataDir, { recursive: true, force: true });

  if (micro === 'none') return;
  const small = micro === 'small';
  const benches: [string, string[]][] = [
    ['policy-eval.ts', small ? ['200', '20'] : ['200000', '200']],
    ['governed-hot-path.ts', small ? ['200', '10'] : ['100000', '100']],
    ['stream-meter.ts', small ? ['200'] : ['30000']],
    ['rss-over-calls.ts', small ? ['200', '8'] : ['200000', '64']],
    // The control plane's benches on both storage backends, side by side.
    ...(['lmdb', 'postgres'] as const).flatMap((backend): [string, string[]][] => [
      ['envelope-create.ts', [...(small ? ['20', '4'] : ['3000', '32']), `--backend=${backend}`]],
      ['event-processor.ts', [...(small ? ['200', '5'] : ['30000', '50']), `--backend=${backend}`]],
      // A fleet's shape: each event of a batch names another envelope.
      ['event-processor.ts', [...(small ? ['200', '100'] : ['30000', '1000']), `--backend=${backend}`]],
    ]),
  ];
  for (const [script, args] of benches) {
    console.log(`\n## ${script} ${args.join(' ')}\n`);
    const child = spawn(process.execPath, [join(HERE, script), ...args], { stdio: 'inherit' });
    const [code] = (await once(child, 'exit')) as [number | null];
    if (code !== 0) throw new Error(`${script} exited with ${code}`);
  }
}

await main();
process.exit(0);
