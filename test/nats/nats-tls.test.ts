import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../core/config/load.ts';
import { messagingFromConfig } from '../../core/config/messaging.ts';
import { isSvcError } from '../../core/errors/index.ts';
import { startNatsServer, type NatsServer } from '../harness/nats-server.ts';

const logger = pino({ level: 'silent' });
const dir = mkdtempSync(join(tmpdir(), 'nats-tls-'));
const file = (name: string) => join(dir, name);
let server: NatsServer;

/** A certificate signed by the test CA, with `san` as its subject alternative name. */
function issue(name: string, san: string): void {
  const openssl = (...args: string[]) => execFileSync('openssl', args, { stdio: 'ignore' });
  openssl(
    'req',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    file(`${name}-key.pem`),
    '-out',
    file(`${name}.csr`),
    '-subj',
    `/CN=${name}`,
  );
  writeFileSync(file(`${name}.ext`), `subjectAltName=${san}\n`);
  openssl(
    'x509',
    '-req',
    '-in',
    file(`${name}.csr`),
    '-CA',
    file('ca.pem'),
    '-CAkey',
    file('ca-key.pem'),
    '-CAcreateserial',
    '-out',
    file(`${name}.pem`),
    '-days',
    '1',
    '-extfile',
    file(`${name}.ext`),
  );
}

beforeAll(async () => {
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      file('ca-key.pem'),
      '-out',
      file('ca.pem'),
      '-days',
      '1',
      '-subj',
      '/CN=svc-test-ca',
    ],
    { stdio: 'ignore' },
  );
  // The client checks the name `localhost` for a loopback address.
  issue('server', 'IP:127.0.0.1,DNS:localhost');
  issue('client', 'DNS:proxy.svc.test');
  // Mutual TLS: the server requires a client certificate from the same CA.
  writeFileSync(
    file('tls.conf'),
    `tls {\n  cert_file: "${file('server.pem')}"\n  key_file: "${file('server-key.pem')}"\n  ca_file: "${file('ca.pem')}"\n  verify: true\n}\n`,
  );
  server = await startNatsServer({ configFile: file('tls.conf') });
}, 30_000);

afterAll(async () => {
  await server?.dispose();
  rmSync(dir, { recursive: true, force: true });
});

const configWith = (tls: Record<string, string>) =>
  loadConfig({}, { nats_url: server.url, log_level: 'silent', ...tls });

async function failureCode(promise: Promise<unknown>): Promise<string | null> {
  try {
    const messaging = await promise;
    await (messaging as { close(): Promise<void> }).close();
    return null;
  } catch (error) {
    return isSvcError(error) ? error.code : 'other';
  }
}

describe('NATS over TLS (SVC_NATS_TLS_CA_FILE, SVC_NATS_TLS_CERT_FILE, SVC_NATS_TLS_KEY_FILE)', () => {
  it('connects with the CA and a client certificate and carries events', async () => {
    const config = configWith({
      nats_tls_ca_file: file('ca.pem'),
      nats_tls_cert_file: file('client.pem'),
      nats_tls_key_file: file('client-key.pem'),
    });
    const messaging = await messagingFromConfig(config, logger, { name: 'tls-test', manage: true });
    try {
      const seen: unknown[] = [];
      const sub = await messaging.bus.subscribe('svc.tls.events.>', (m) => {
        seen.push(m.data);
        return Promise.resolve();
      });
      await messaging.bus.publish('svc.tls.events.llm.call', { over: 'tls' }, { msgId: 'tls-1' });
      await expect.poll(() => seen, { timeout: 5000 }).toEqual([{ over: 'tls' }]);
      await sub.unsubscribe();
      expect(messaging.healthy()).toBe(true);
    } finally {
      await messaging.close();
    }
  });

  it('refuses to start without the client certificate the server requires, or without trusting its CA', async () => {
    const noClientCert = configWith({ nats_tls_ca_file: file('ca.pem') });
    expect(await failureCode(messagingFromConfig(noClientCert, logger, { name: 'tls-test', manage: true }))).toBe(
      'SVC-SYS-9001',
    );
    const untrusted = configWith({ nats_tls_cert_file: file('client.pem'), nats_tls_key_file: file('client-key.pem') });
    expect(await failureCode(messagingFromConfig(untrusted, logger, { name: 'tls-test', manage: true }))).toBe(
      'SVC-SYS-9001',
    );
  });
});
