/**
 * Loaded into a bench's server process (`BENCH_SERVER_FLAGS="--import ./test/bench/request-allocation.ts"`
 * with `envelope-create-http.ts`): samples what the process allocates, garbage included, from the
 * end of the warm-up (the first `REQUEST_ALLOCATION_SKIP` requests, default 500) until the parent
 * disconnects, then prints to stderr the bytes per request and the functions that allocated
 * most (builtins counted to the function that called them). Not a test.
 */
import diagnostics_channel from 'node:diagnostics_channel';
import { Session } from 'node:inspector';

interface ProfileNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: ProfileNode[];
}

const session = new Session();
session.connect();
let skip = Number(process.env.REQUEST_ALLOCATION_SKIP ?? 500);
let counted = 0;
diagnostics_channel.subscribe('http.server.request.start', () => {
  if (skip-- > 0) return;
  if (counted++ === 0)
    session.post('HeapProfiler.startSampling', {
      samplingInterval: 4096,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    });
});

function report(head: ProfileNode): string {
  const bytes = new Map<string, number>();
  let total = 0;
  const walk = (node: ProfileNode, caller: string): void => {
    const { functionName, url, lineNumber } = node.callFrame;
    const here =
      url === '' ? caller : `${functionName || '(anonymous)'} ${url.split('/').slice(-2).join('/')}:${lineNumber + 1}`;
    total += node.selfSize;
    bytes.set(here, (bytes.get(here) ?? 0) + node.selfSize);
    for (const child of node.children) walk(child, here);
  };
  walk(head, '(root)');
  const top = [...bytes].sort((a, b) => b[1] - a[1]).slice(0, 15);
  return [
    `${counted} requests: ${Math.round(total / counted / 102.4) / 10} KB allocated per request (sampled)`,
    ...top.map(([where, size]) => `${((100 * size) / total).toFixed(1).padStart(5)} %  ${where}`),
  ].join('\n');
}

process.once('disconnect', () => {
  if (counted === 0) return;
  session.post('HeapProfiler.stopSampling', (error, result) => {
    if (error === null) process.stderr.write(`${report(result.profile.head)}\n`);
  });
});
