import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger } from './logger.ts';
import { configuredSecrets, createScrubber, loggableUrl } from './redact.ts';

const scrub = createScrubber(['my-configured-secret-value']);

describe('the scrubber', () => {
  it.each([
    ['nats://cp:hunter2-password@nats.internal:4222', 'hunter2-password'],
    ['https://user:pw-0123456789@hooks.example.com/x', 'pw-0123456789'],
    ['/v1beta/models/g:generateContent?alt=sse&key=AIzaSyA-0123456789abcdefghijklmnopqrs', 'AIzaSyA-0123456789'],
    ['https://hooks.example.com/x?token=abcdef123456&ok=1', 'abcdef123456'],
    [
      'key svc_0123456789abcdef_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA used',
      'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA',
    ],
    ['Authorization: Bearer opaque.token-value_123', 'opaque.token-value_123'],
    ['jwt eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJl here', 'c2lnbmF0dXJl'],
    ['upstream said: invalid key sk-proj-abcdefghijklmnop1234', 'sk-proj-abcdefghijklmnop1234'],
    ['the value my-configured-secret-value leaked', 'my-configured-secret-value'],
    ['rotated to whsec_BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB', 'BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB'],
  ])('removes the credential from %s', (text, secret) => {
    const out = scrub.text(text);
    expect(out).not.toContain(secret);
    expect(out).toContain('[redacted]');
  });

  it('leaves the structure of a JSON line alone', () => {
    const line = JSON.stringify({ target: 'ftp://files.example.com', contact: 'ops@example.com' });
    expect(scrub.text(line)).toBe(line);
  });

  it('keeps what is not a credential', () => {
    const text = 'budget 3f0c… reached 80% at https://api.openai.com/v1/chat/completions?alt=sse';
    expect(scrub.text(text)).toBe(text);
  });

  it('redacts credential fields at any depth, headers included, and errors as plain objects', () => {
    const error = Object.assign(new Error('connect to nats://u:secretpass@h:4222 failed'), { code: 'ECONNREFUSED' });
    const out = scrub.value({
      headers: { authorization: 'x', 'X-Api-Key': 'y', 'api-key': 'z', 'x-goog-api-key': 'w', accept: 'json' },
      config: { nats_password: 'p', webhook_secret: 's', port: 1 },
      err: error,
    }) as Record<string, Record<string, unknown>>;
    expect(out.headers).toEqual({
      authorization: '[redacted]',
      'X-Api-Key': '[redacted]',
      'api-key': '[redacted]',
      'x-goog-api-key': '[redacted]',
      accept: 'json',
    });
    expect(out.config).toEqual({ nats_password: '[redacted]', webhook_secret: '[redacted]', port: 1 });
    expect(out.err).toMatchObject({ type: 'Error', code: 'ECONNREFUSED' });
    expect(JSON.stringify(out.err)).not.toContain('secretpass');
  });

  it('survives cycles', () => {
    const a: Record<string, unknown> = { name: 'a' };
    a.self = a;
    expect(scrub.value(a)).toEqual({ name: 'a', self: '[omitted]' });
  });

  it('finds the secrets of a configuration by their keys', () => {
    expect(configuredSecrets({ api_key: 'k', nats_password: 'p', http_port: 8080, mode: 'proxy' }).sort()).toEqual([
      'k',
      'p',
    ]);
  });

  it('logs a URL as origin and path only', () => {
    expect(loggableUrl('https://u:p@hooks.example.com:8443/a/b?sig=1#f')).toBe('https://hooks.example.com:8443/a/b');
  });
});

describe('createLogger', () => {
  it('scrubs messages, fields, errors and child bindings of every line', () => {
    let out = '';
    const destination = new Writable({
      write(chunk: Buffer, _e, done) {
        out += chunk.toString();
        done();
      },
    });
    const logger = createLogger({ level: 'trace', service: 't', secrets: ['configured-secret-0001'], destination });
    const child = logger.child({ nats: 'nats://u:child-secret-1@h:4222' });
    child.info({ url: '/x?key=query-secret-2' }, 'sent Bearer message-secret-3');
    child.error({ err: new Error('refused configured-secret-0001') }, 'failed');
    logger.warn(new Error('bare error with sk-ant-api03-bareerror0123456789'));
    for (const secret of [
      'child-secret-1',
      'query-secret-2',
      'message-secret-3',
      'configured-secret-0001',
      'bareerror',
    ])
      expect(out).not.toContain(secret);
    expect(out.split('\n').filter(Boolean)).toHaveLength(3);
  });
});
