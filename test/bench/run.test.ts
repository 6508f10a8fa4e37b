import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';

const RUN = new URL('./run.ts', import.meta.url).pathname;

describe('npm run bench', () => {
  it('runs end to end with a handful of iterations and prints the side-by-side table and the micro-benchmarks', async () => {
    const child = spawn(process.execPath, [RUN, '40', '10', 'small', '1'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    const [code] = (await once(child, 'exit')) as [number | null];
    expect(code, out).toBe(0);
    for (const row of ['| bare relay | whole |', '| proxy, reverse | stream |', '| proxy, CONNECT + TLS | whole |'])
      expect(out).toContain(row);
    // Rates, ratios to the relay, and the server's CPU time per call, at both concurrencies; then
    // at one connection the p50 and the CPU time per call.
    expect(out).toMatch(
      /\| proxy, reverse \| stream \| [\d,]+ \| [\d,]+ \| [\d.]+ \/ [\d.]+ \| [\d,]+ \/ [\d,]+ \| [\d,]+ \| [\d,]+ \|/,
    );
    expect(out).toMatch(/\| governed proxy \| [\d.]+ \| [\d.]+ \| [\d.]+ \| [\d.]+ \|/);
    for (const script of [
      'policy-eval.ts',
      'governed-hot-path.ts',
      'stream-meter.ts',
      'rss-over-calls.ts',
      'envelope-create.ts',
      'event-processor.ts',
    ])
      expect(out).toContain(`## ${script}`);
  }, 300_000);
});
