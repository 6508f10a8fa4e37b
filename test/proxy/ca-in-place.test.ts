import { X509Certificate } from 'node:crypto';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createMemoryMessaging } from '../../core/bus/memory-messaging.ts';
import type { Config } from '../../core/config/schema.ts';
import { isSvcError } from '../../core/errors/index.ts';
import { loadPriceTable } from '../../core/metering/prices.ts';
import { createProxy } from '../../proxy/create-proxy.ts';
import { proxyTestConfig } from './harness.ts';

const logger = pino({ level: 'silent' });
let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'proxy-ca-in-place-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function build(overrides: Partial<Record<keyof Config, unknown>>) {
  const messaging = createMemoryMessaging({ logger });
  try {
    return await createProxy({
      config: proxyTestConfig(join(dir, 'data'), overrides),
      logger,
      messaging,
      prices: loadPriceTable(),
      bootstrap: { tenantId: 'acme', apiKey: 'svc_test', budgetId: 'budget-1' },
    });
  } finally {
    await messaging.close();
  }
}

async function failure(overrides: Partial<Record<keyof Config, unknown>>): Promise<unknown> {
  return build(overrides).then(
    async (proxy) => {
      await proxy.close();
      return undefined;
    },
    (error: unknown) => error,
  );
}

describe('the proxy CA at SVC_CA_CERT_FILE / SVC_CA_KEY_FILE in standalone mode', () => {
  it('is generated where the files are configured when both are missing (directories made, key 0600), and reused after', async () => {
    const certFile = join(dir, 'mounted', 'certs', 'ca.crt');
    const keyFile = join(dir, 'mounted', 'private', 'ca.key');
    const first = await build({ ca_cert_file: certFile, ca_key_file: keyFile });
    try {
      expect(first.caGenerated).toBe(true);
      expect(first.caCertFile).toBe(certFile);
      expect(await readFile(certFile, 'utf8')).toBe(first.caCertPem);
      expect(new X509Certificate(first.caCertPem).ca).toBe(true);
      expect((await stat(keyFile)).mode & 0o777).toBe(0o600);
    } finally {
      await first.close();
    }
    const second = await build({ ca_cert_file: certFile, ca_key_file: keyFile });
    try {
      expect(second.caGenerated).toBe(false);
      expect(second.caCertPem).toBe(first.caCertPem);
    } finally {
      await second.close();
    }
  });

  it('refuses to start with one file present and the other missing, naming the missing one (SVC-SYS-9001)', async () => {
    const certFile = join(dir, 'ca.crt');
    const keyFile = join(dir, 'ca.key');
    await writeFile(certFile, 'certificate without its key');
    const error = await failure({ ca_cert_file: certFile, ca_key_file: keyFile });
    expect(isSvcError(error) && error.code).toBe('SVC-SYS-9001');
    expect((error as Error).message).toContain(keyFile);
    expect(await readFile(certFile, 'utf8')).toBe('certificate without its key');
  });

  it('refuses a configuration naming only one of the two files (SVC-SYS-9002 naming the other)', async () => {
    const error = await failure({ ca_cert_file: join(dir, 'ca.crt') });
    expect(isSvcError(error) && error.code).toBe('SVC-SYS-9002');
    expect((error as Error).message).toContain('SVC_CA_KEY_FILE');
  });

  it('never generates a CA in proxy mode, where the chart mounts it', async () => {
    const certFile = join(dir, 'ca.crt');
    const error = await failure({ mode: 'proxy', ca_cert_file: certFile, ca_key_file: join(dir, 'ca.key') });
    expect(isSvcError(error) && error.code).toBe('SVC-SYS-9001');
    await expect(stat(certFile)).rejects.toThrow();
  });
});
