import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';

const SCRIPT = new URL('./thread-cpu.ts', import.meta.url).pathname;

async function run(args: string[]): Promise<string> {
  const child = spawn(process.execPath, [SCRIPT, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (out += c.toString()));
  const [code] = (await once(child, 'exit')) as [number | null];
  expect(code, out).toBe(0);
  return out;
}

describe('thread-cpu bench', () => {
  it('prints, per round, the CPU time per call of the proxy by thread beside the upstream', async () => {
    const out = await run(['30', '2', '2', 'proxy', 'stream', '10']);
    expect(out).toContain('proxy, streams, 2 connection(s)');
    const rounds = out.match(
      /^round \d: \d+ calls\/s, CPU \d+ \(main \d+, main system \d+.*\), upstream \d+, load average [\d.]+$/gm,
    );
    expect(rounds, out).toHaveLength(2);
  }, 120_000);

  it('measures the bare relay too, with whole answers', async () => {
    const out = await run(['30', '1', '1', 'relay', 'whole', '10']);
    expect(out).toContain('relay, whole answers, 1 connection(s)');
    expect(out).toMatch(/^round 0: \d+ calls\/s, CPU \d+ \(main \d+/m);
  }, 120_000);
});
