import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const ROOT = new URL('../..', import.meta.url).pathname;
const dockerfile = readFileSync(`${ROOT}/Dockerfile`, 'utf8');

/** The linter of the Dockerfile language service (npm `dockerfile-utils`): syntax and instruction rules. */
const LINTER = 'dockerfile-utils';
const { validate } = (await import(LINTER)) as { validate: (content: string) => { message: string }[] };

/** Instructions of the Dockerfile, continuation lines joined, comments dropped. */
function instructions(text: string): { op: string; args: string }[] {
  return text
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'))
    .map((l) => {
      const [op, ...rest] = l.split(/\s+/);
      return { op: op!.toUpperCase(), args: rest.join(' ') };
    });
}

describe('Dockerfile', () => {
  it('passes the dockerfile-utils linter (the Dockerfile language service) with no diagnostic', () => {
    expect(validate(dockerfile)).toEqual([]);
    // The linter does report problems: the same rules on a broken file.
    const broken = validate(
      'FROM node:24-slim\nMAINTAINER someone\nEXPOSE http\nCMD node main.js extra\nHEALTHCHECK CMD\n',
    );
    expect(broken.length).toBeGreaterThanOrEqual(2);
  });

  it('runs compiled JavaScript as a non-root user on a distroless Node 24 base, versioned by build arguments', () => {
    const all = instructions(dockerfile);
    const lastFrom = all.map((i) => i.op).lastIndexOf('FROM');
    const final = all.slice(lastFrom);
    expect(final[0]!.args).toBe('gcr.io/distroless/nodejs${NODE_MAJOR}-debian12:nonroot');
    expect(all.find((i) => i.op === 'ARG' && i.args.startsWith('NODE_MAJOR'))?.args).toBe('NODE_MAJOR=24');
    expect(final.find((i) => i.op === 'USER')?.args).toBe('65532:65532');
    expect(final.find((i) => i.op === 'CMD')?.args).toMatch(/^\[.*"dist\/standalone\/main\.js"\]$/);
    // Only the build's output and the production dependencies reach the final image: no sources.
    const copies = final.filter((i) => i.op === 'COPY').map((i) => i.args);
    expect(copies.every((c) => c.startsWith('--from=build'))).toBe(true);
    expect(copies.some((c) => /\/app\/(core|proxy|control-plane|standalone)\b/.test(c))).toBe(false);
    expect(all.some((i) => i.op === 'RUN' && i.args.includes('npm run build'))).toBe(true);
    expect(all.some((i) => i.op === 'ADD')).toBe(false);
    const labels = final
      .filter((i) => i.op === 'LABEL')
      .map((i) => i.args)
      .join(' ');
    for (const label of ['version="${VERSION}"', 'revision="${REVISION}"', 'created="${CREATED}"', 'title=']) {
      expect(labels).toContain(`org.opencontainers.image.${label}`);
    }
    expect(final.some((i) => i.op === 'ARG' && i.args.startsWith('VERSION'))).toBe(true);
    // HEALTHCHECK is left out on purpose, and the file says why.
    expect(dockerfile).toMatch(/No HEALTHCHECK: /);
  });

  it('keeps the build context small and free of local state', () => {
    const ignored = readFileSync(`${ROOT}/.dockerignore`, 'utf8').split('\n');
    for (const entry of ['node_modules', 'dist', 'data', '.git', 'test']) expect(ignored).toContain(entry);
  });
});
