/**
 * A process's first exact token count, each run in a fresh process, with the counter tokenizing
 * here (`tokenizeOn: 'here'`, as the proxy did) and on the token thread only (`'thread'`, as it
 * does): the event loop's longest stall around the first count (`monitorEventLoopDelay`), the
 * first count's synchronous part and its wait, then per count of a short text the wait and the event loop's busy time, and
 * RSS before, after the counts and once the counter is freed (as the thread's idle stop frees it).
 *
 *   node test/bench/first-count.ts [runs=3] [counts=2000]
 */
import { execFileSync } from 'node:child_process';

const runs = Number(process.argv[2] ?? 3);
const counts = Number(process.argv[3] ?? 2000);
const root = new URL('../../', import.meta.url).href;

function inFreshProcess(mode: 'here' | 'thread'): string {
  const body = `
    import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
    import { setTimeout as sleep } from 'node:timers/promises';
    const { createTokenCounter } = await import('${root}core/metering/tokens.ts');
    const rss = () => (process.memoryUsage().rss / 1048576).toFixed(1);
    const counter = createTokenCounter({ tokenizeOn: '${mode}' });
    const text = 'Summarise the quarterly report in three bullet points.';
    const count = () => counter.exactly(() => counter.countText('gpt-4o', text));
    globalThis.gc(); await sleep(100);
    const idle = rss();
    const delay = monitorEventLoopDelay({ resolution: 1 });
    delay.enable();
    await sleep(50);
    let t = performance.now();
    const counting = count();
    // Before its first wait: here the whole count, on the thread the thread's start.
    const sync = performance.now() - t;
    await counting;
    const first = performance.now() - t;
    // The stall is recorded once the loop runs again.
    await sleep(50);
    delay.disable();
    const stall = delay.max / 1e6;
    const busy = performance.eventLoopUtilization();
    t = performance.now();
    for (let i = 0; i < ${counts}; i++) await count();
    const per = ((performance.now() - t) * 1000) / ${counts};
    const loop = (performance.eventLoopUtilization(busy).active * 1000) / ${counts};
    const counted = rss();
    counter.free();
    await sleep(200); globalThis.gc(); await sleep(100);
    console.log(\`| ${mode} | \${stall.toFixed(1)} | \${sync.toFixed(1)} | \${first.toFixed(0)} | \${per.toFixed(1)} | \${loop.toFixed(1)} | \${idle} | \${counted} | \${rss()} |\`);
  `;
  return execFileSync(process.execPath, ['--expose-gc', '--input-type=module', '-e', body], {
    encoding: 'utf8',
  }).trim();
}

console.log(
  '| tokenized | longest loop stall at the first count (ms) | first count before its first wait (ms) | first count waited (ms) | per short count (µs) | loop busy per count (µs) | RSS idle (MB) | RSS after counts (MB) | RSS freed (MB) |',
);
console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
for (let i = 0; i < runs; i++) for (const mode of ['here', 'thread'] as const) console.log(inFreshProcess(mode));
