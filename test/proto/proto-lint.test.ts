import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const REPO = fileURLToPath(new URL('../../', import.meta.url));
const BUF = join(REPO, 'node_modules', '.bin', 'buf');
const scratch = mkdtempSync(join(tmpdir(), 'proto-lint-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

interface LintIssue {
  path: string;
  type: string;
  message: string;
}

/**
 * Runs `buf lint proto` in `cwd` offline: an empty cache and a proxy that refuses every
 * connection, so the lint passes only if every import resolves from the workspace itself.
 */
function bufLint(cwd: string): { status: number | null; issues: LintIssue[]; stderr: string } {
  const run = spawnSync(BUF, ['lint', 'proto', '--error-format', 'json'], {
    cwd,
    encoding: 'utf8',
    timeout: 60_000,
    env: {
      PATH: process.env.PATH,
      HOME: scratch,
      BUF_CACHE_DIR: mkdtempSync(join(scratch, 'cache-')),
      HTTPS_PROXY: 'http://127.0.0.1:9',
      HTTP_PROXY: 'http://127.0.0.1:9',
    },
  });
  const issues = run.stdout
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as LintIssue);
  return { status: run.status, issues, stderr: run.stderr };
}

describe('buf lint of proto/', () => {
  it('passes the STANDARD rules offline, the googleapis imports resolving from google-proto-files', () => {
    const result = bufLint(REPO);
    expect(result.issues).toEqual([]);
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
  });

  it('is not vacuous: a contract that breaks a STANDARD rule fails the lint', () => {
    const copy = mkdtempSync(join(scratch, 'copy-'));
    cpSync(join(REPO, 'proto'), join(copy, 'proto'), { recursive: true });
    cpSync(join(REPO, 'buf.yaml'), join(copy, 'buf.yaml'));
    symlinkSync(join(REPO, 'node_modules'), join(copy, 'node_modules'));
    const file = join(copy, 'proto', 'svc', 'envelope', 'v1', 'envelope.proto');
    const text = readFileSync(file, 'utf8');
    expect(text).toContain('ENVELOPE_STATUS_UNSPECIFIED = 0;');
    writeFileSync(file, text.replace('ENVELOPE_STATUS_UNSPECIFIED = 0;', 'ENVELOPE_STATUS_NONE = 0;'));

    const result = bufLint(copy);
    expect(result.status).not.toBe(0);
    expect(result.issues).toEqual([
      expect.objectContaining({ path: 'proto/svc/envelope/v1/envelope.proto', type: 'ENUM_ZERO_VALUE_SUFFIX' }),
    ]);
  });
});
