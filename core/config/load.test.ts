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

  it('limits gRPC messages to 4 MiB and calls to a 30 s deadline unless configured (spec 8)', () => {
    const defaults = loadConfig({});
    expect(defaults.grpc_max_message_bytes).toBe(4 * 1_048_576);
    expect(defaults.grpc_default_timeout_ms).toBe(30_000);
    const set = loadConfig({ SVC_GRPC_MAX_MESSAGE_BYTES: '65536', SVC_GRPC_DEFAULT_TIMEOUT_MS: '5000' });
    expect(set.grpc_max_message_bytes).toBe(65_536);
    expect(set.grpc_default_timeout_ms).toBe(5_000);
    expect(failure(() => loadConfig({ SVC_GRPC_DEFAULT_TIMEOUT_MS: '0' })).message).toContain(
      'SVC_GRPC_DEFAULT_TIMEOUT_MS',
    );
  });

  it('takes the gRPC connection limits and the received-bytes budget from settings', () => {
    const defaults = loadConfig({});
    expect(defaults.grpc_max_concurrent_streams).toBe(100);
    expect(defaults.grpc_max_received_bytes).toBe(64 * 1_048_576);
    const set = loadConfig({ SVC_GRPC_MAX_CONCURRENT_STREAMS: '10', SVC_GRPC_MAX_CONNECTION_AGE_MS: '60000' });
    expect(set.grpc_max_concurrent_streams).toBe(10);
    expect(set.grpc_max_connection_age_ms).toBe(60_000);
    // A budget below one largest message could never admit it.
    expect(failure(() => loadConfig({ SVC_GRPC_MAX_RECEIVED_BYTES: '65536' })).message).toContain(
      'SVC_GRPC_MAX_RECEIVED_BYTES',
    );
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

  it('refuses a root key that is a placeholder, naming the variable but not the key', () => {
    const placeholder = 'change-me-to-a-long-random-secret';
    for (const key of [placeholder, `prefix-${placeholder.toUpperCase()}`]) {
      const error = failure(() => loadConfig({ SVC_BOOTSTRAP_ADMIN_KEY: key }));
      expect(error.code).toBe('SVC-SYS-9002');
      expect(error.fieldViolations).toEqual([
        { field: 'SVC_BOOTSTRAP_ADMIN_KEY', description: expect.stringContaining('placeholder') as unknown },
      ]);
      expect(error.message).not.toContain(key);
    }
    expect(loadConfig({ SVC_BOOTSTRAP_ADMIN_KEY: 'a'.repeat(48) }).bootstrap_admin_key).toBe('a'.repeat(48));
  });

  it('names the file key of a bad value and refuses unknown keys', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cfg-'));
    const file = join(dir, 'c.json');
    writeFileSync(file, JSON.stringify({ log_level: 'loud', colour: 'blue' }));
    const error = failure(() => loadConfig({ SVC_CONFIG_FILE: file }));
    expect(error.message).toContain('log_level (config file)');
    expect(error.fieldViolations.map((v) => v.description).join()).toMatch(/colour/);
  });

  it("reads the proxy outbox's publish delay, 10 ms by default, and refuses one below 0 or above 1000 ms", () => {
    expect(loadConfig({}).proxy_outbox_publish_delay_ms).toBe(10);
    expect(loadConfig({ SVC_PROXY_OUTBOX_PUBLISH_DELAY_MS: '0' }).proxy_outbox_publish_delay_ms).toBe(0);
    for (const bad of ['1001', '-1']) {
      const error = failure(() => loadConfig({ SVC_PROXY_OUTBOX_PUBLISH_DELAY_MS: bad }));
      expect(error.code).toBe('SVC-SYS-9002');
      expect(error.message).toContain('SVC_PROXY_OUTBOX_PUBLISH_DELAY_MS');
    }
  });

  it('reads the stream settings, and refuses a stream max age the de-duplication entries would not outlive', () => {
    const config = loadConfig({
      SVC_NATS_STREAM_MAX_BYTES: '107374182400',
      SVC_NATS_STREAM_MAX_AGE_SECONDS: '86400',
      SVC_NATS_STREAM_DISCARD: 'new',
      SVC_NATS_MAX_ACK_PENDING: '6000',
      SVC_NATS_ACK_WAIT_SECONDS: '45',
    });
    expect(config).toMatchObject({
      nats_stream_max_bytes: 100 * 1024 ** 3,
      nats_stream_max_age_seconds: 86_400,
      nats_stream_discard: 'new',
      nats_max_ack_pending: 6_000,
      nats_ack_wait_seconds: 45,
    });
    expect(config.nats_stream_replicas).toBeUndefined();

    const error = failure(() => loadConfig({ SVC_NATS_STREAM_MAX_AGE_SECONDS: '864000', SVC_RETENTION_DAYS: '10' }));
    expect(error.code).toBe('SVC-SYS-9002');
    expect(error.fieldViolations).toEqual([
      { field: 'SVC_NATS_STREAM_MAX_AGE_SECONDS', description: expect.stringContaining('SVC_RETENTION_DAYS') },
    ]);
    expect(failure(() => loadConfig({ SVC_NATS_MAX_ACK_PENDING: '999' })).message).toContain(
      'SVC_NATS_MAX_ACK_PENDING',
    );
    for (const wait of ['1', '3601', 'soon']) {
      const refused = failure(() => loadConfig({ SVC_NATS_ACK_WAIT_SECONDS: wait }));
      expect(refused.code, wait).toBe('SVC-SYS-9002');
      expect(
        refused.fieldViolations.map((v) => v.field),
        wait,
      ).toEqual(['SVC_NATS_ACK_WAIT_SECONDS']);
    }
  });

  it('accepts JWTs only with an issuer and an audience, from a JWKS fetched over https', () => {
    const jwks = { SVC_JWT_JWKS_URL: 'https://idp.example/.well-known/jwks.json' };
    const named = { SVC_JWT_ISSUER: 'https://idp.example/', SVC_JWT_AUDIENCE: 'governance-api' };
    expect(failure(() => loadConfig(jwks)).fieldViolations).toEqual([
      { field: 'SVC_JWT_ISSUER', description: 'required when SVC_JWT_JWKS_URL is set' },
      { field: 'SVC_JWT_AUDIENCE', description: 'required when SVC_JWT_JWKS_URL is set' },
    ]);
    expect(
      failure(() => loadConfig({ ...jwks, SVC_JWT_ISSUER: 'https://idp.example/' })).fieldViolations.map(
        (v) => v.field,
      ),
    ).toEqual(['SVC_JWT_AUDIENCE']);
    expect(loadConfig({ ...jwks, ...named }).jwt_max_lifetime_seconds).toBe(86_400);

    for (const url of ['http://idp.example/jwks.json', 'http://10.0.0.5/jwks.json', 'ftp://idp.example/jwks.json']) {
      const refused = failure(() => loadConfig({ ...named, SVC_JWT_JWKS_URL: url }));
      expect(
        refused.fieldViolations.map((v) => v.field),
        url,
      ).toEqual(['SVC_JWT_JWKS_URL']);
      expect(refused.message, url).toContain('https://');
    }
    for (const url of ['http://127.0.0.1:8081/jwks.json', 'http://localhost/jwks.json', 'http://[::1]:9000/jwks']) {
      expect(loadConfig({ ...named, SVC_JWT_JWKS_URL: url }).jwt_jwks_url, url).toBe(url);
    }
  });
});
