/**
 * Loaded into a bench's server process (`BENCH_SERVER_FLAGS="--import ./test/bench/request-tail.ts"`
 * with `envelope-create-http.ts`): times each POST from the start of its request to the end of its
 * response inside the server, and tells how much of the slowest hundredth garbage collection
 * explains. The first `REQUEST_TAIL_SKIP` requests (default 500, the bench's warm-up) are not
 * counted; the figures are printed to stderr when the parent disconnects. Not a test.
 */
import diagnostics_channel from 'node:diagnostics_channel';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance, PerformanceObserver } from 'node:perf_hooks';

type Span = readonly [start: number, end: number];

const pauses: Span[] = [];
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) pauses.push([entry.startTime, entry.startTime + entry.duration]);
}).observe({ entryTypes: ['gc'] });

const requests: Span[] = [];
let skip = Number(process.env.REQUEST_TAIL_SKIP ?? 500);
diagnostics_channel.subscribe('http.server.request.start', (message) => {
  const { request, response } = message as { request: IncomingMessage; response: ServerResponse };
  if (request.method !== 'POST' || skip-- > 0) return;
  const start = performance.now();
  response.once('finish', () => requests.push([start, performance.now()]));
});

/** Milliseconds of garbage collection within the span. */
function paused([start, end]: Span): number {
  let total = 0;
  for (const [from, to] of pauses) if (to > start && from < end) total += Math.min(end, to) - Math.max(start, from);
  return total;
}

function at(sorted: readonly number[], q: number): string {
  return (sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0).toFixed(2);
}

process.once('disconnect', () => {
  if (requests.length === 0) return;
  const took = (span: Span) => span[1] - span[0];
  const latencies = requests.map(took).sort((a, b) => a - b);
  const p99 = latencies[Math.floor(0.99 * latencies.length)]!;
  const tail = requests.filter((span) => took(span) >= p99);
  const rest = requests.filter((span) => took(span) < p99);
  const share = (spans: Span[]) => ((100 * spans.filter((s) => paused(s) > 0).length) / spans.length).toFixed(1);
  const mean = (spans: Span[]) => (spans.reduce((sum, s) => sum + paused(s), 0) / spans.length).toFixed(2);
  const withoutGc = requests.map((s) => took(s) - paused(s)).sort((a, b) => a - b);
  const since = requests[0]![0];
  const counted = pauses.filter(([from]) => from >= since).map(([from, to]) => to - from);
  counted.sort((a, b) => a - b);
  process.stderr.write(
    `server: ${latencies.length} requests, p50 ${at(latencies, 0.5)} ms, p90 ${at(latencies, 0.9)} ms, ` +
      `p99 ${at(latencies, 0.99)} ms, p99.9 ${at(latencies, 0.999)} ms; ${counted.length} GC pauses ` +
      `(p50 ${at(counted, 0.5)} ms, max ${at(counted, 1)} ms); GC within ${share(tail)} % of the requests ` +
      `at or past the p99 (${mean(tail)} ms each on average), ${share(rest)} % of the others ` +
      `(${mean(rest)} ms); p99 with GC time taken out ${at(withoutGc, 0.99)} ms\n`,
  );
});
