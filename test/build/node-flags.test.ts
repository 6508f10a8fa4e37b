import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { SIDECAR_ENV, SIDECAR_NODE_FLAGS } from '../../proxy/node-flags.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
const read = (path: string) => readFileSync(ROOT + path, 'utf8');
/** Prose wraps lines: compared with runs of white space made one. */
const flat = (text: string) => text.replace(/\s+/g, ' ');

describe("the sidecar's V8 flags", () => {
  it('are ones this Node accepts: an unknown flag makes node refuse to start', () => {
    const out = execFileSync(process.execPath, [...SIDECAR_NODE_FLAGS, '-e', 'process.stdout.write("up")'], {
      encoding: 'utf8',
    });
    expect(out).toBe('up');
    expect(() =>
      execFileSync(process.execPath, ['--heap-growing-percent-unknown=1', '-e', '0'], { stdio: 'pipe' }),
    ).toThrow(/bad option/);
  });

  it('are the ones `npm run proxy`, `npm start`, the image and the docs give the sidecar and standalone mode', () => {
    const line = SIDECAR_NODE_FLAGS.join(' ');
    const scripts = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts;
    const env = Object.entries(SIDECAR_ENV)
      .map(([name, value]) => `${name}=${value}`)
      .join(' ');
    expect(scripts.proxy).toBe(`${env} node ${line} proxy/main.ts`);
    expect(scripts.start).toBe(`${env} node ${line} standalone/main.ts`);
    expect(read('Dockerfile')).toContain(`args: [${SIDECAR_NODE_FLAGS.join(', ')}, dist/proxy/main.js]`);
    expect(read('Dockerfile')).toContain(
      `CMD ${JSON.stringify([...SIDECAR_NODE_FLAGS, 'dist/standalone/main.js']).replaceAll(',', ', ')}`,
    );
    expect(flat(read('README.md'))).toContain(`node ${line} dist/proxy/main.js`);
    expect(flat(read('docs/kubernetes.md'))).toContain(`node ${line} dist/proxy/main.js`);
  });

  it("are run with the sidecar's environment, which the image sets for the sidecar and standalone mode", () => {
    const image = /^ENV ((?:.*\\\n)*.*)$/m.exec(read('Dockerfile'))?.[1] ?? '';
    for (const [name, value] of Object.entries(SIDECAR_ENV)) expect(flat(image)).toContain(`${name}=${value} `);
  });
});
