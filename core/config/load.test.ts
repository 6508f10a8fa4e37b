import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SvcError } from '../errors/index.ts';
import { loadConfig } from './load.ts';

function failure(fn: () => unknown): SvcError {
  try {
    fn();
  } catch (error) {
    if (error instanceof SvcError) return error;
    throw error;
  }
  throw new Error('expected a failure');
}

describe('loadConfig', () => {
  it('uses the embedded defaults with no input', () => {
    const config = loadConfig({});
    expect(config.http_port).toBe(8080);
    expect(config.data_dir).toBe('./data');
    expect(config.nats_url).toBeUndefined();
  });

  it('reads SVC_* variables over the file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cfg-'));
    const file = join(dir, 'c.json');
    writeFileSync(file, JSON.stringify({ http_port: 9000, log_level: 'debug' }));
    const config = loadConfig({ SVC_CONFIG_FILE: file, SVC_HTTP_PORT: '9100' });
    expect(config.http_port).toBe(9100);
    expect(config.log_level).toBe('debug');
  });

  it('names the variable of a bad value', () => {
    const error = failure(() => loadConfig({ SVC_HTTP_PORT: 'eighty' }));
    expect(error.code).toBe('SVC-SYS-9002');
    expect(error.message).toContain('SVC_HTTP_PORT');
  });

  it('names the file key of a bad value and refuses unknown keys', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cfg-'));
    const file = join(dir, 'c.json');
    writeFileSync(file, JSON.stringify({ log_level: 'loud', colour: 'blue' }));
    const error = failure(() => loadConfig({ SVC_CONFIG_FILE: file }));
    expect(error.message).toContain('log_level (config file)');
    expect(error.fieldViolations.map((v) => v.description).join()).toMatch(/colour/);
  });
});
