import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BusLogger, Messaging } from '../../core/bus/bus.ts';
import { loadConfig } from '../../core/config/load.ts';
import { messagingFromConfig } from '../../core/config/messaging.ts';
import { syncSubjects } from '../../core/sync/contract.ts';
import { startNatsServer, type NatsServer } from '../harness/nats-server.ts';

const quiet: BusLogger = { warn: () => undefined, error: () => undefined };
const CONFIG = fileURLToPath(new URL('../../config/nats/tenant-isolation.conf', import.meta.url));

describe('messagingFromConfig under the tenant isolation configuration', () => {
  let server: NatsServer;
  let controlPlane: Messaging;
  const opened: Messaging[] = [];

  beforeAll(async () => {
    server = await startNatsServer({ configFile: CONFIG });
    const config = loadConfig(
      {},
      { nats_url: server.url, nats_user: 'control-plane', nats_password: 'control-plane-secret' },
    );
    controlPlane = await messagingFromConfig(config, quiet, { name: 'control-plane', manage: true });
    await controlPlane.requests.reply(syncSubjects.lease('*'), (_data, subject) =>
      Promise.resolve({ answered: subject }),
    );
  });
  afterAll(async () => {
    await Promise.all(opened.map((m) => m.close()));
    await controlPlane.close();
    await server.dispose();
  });

  const proxy = async (extra: Record<string, unknown> = {}) => {
    const config = loadConfig(
      {},
      { nats_url: server.url, nats_user: 'proxy-acme', nats_password: 'proxy-acme-secret', ...extra },
    );
    const messaging = await messagingFromConfig(config, quiet, { name: 'proxy-acme', manage: false, tenant: 'acme' });
    opened.push(messaging);
    return messaging;
  };

  it("gives a proxy its tenant's inbox, so its lease requests get answers", async () => {
    const messaging = await proxy();
    expect(await messaging.requests.request(syncSubjects.lease('acme'), { ask: 1 }, 2000)).toEqual({
      answered: 'svc.acme.leases.request',
    });
  });

  it('takes the credentials written into SVC_NATS_URL', async () => {
    const config = loadConfig({}, { nats_url: server.url.replace('nats://', 'nats://proxy-acme:proxy-acme-secret@') });
    const messaging = await messagingFromConfig(config, quiet, { name: 'proxy-acme', manage: false, tenant: 'acme' });
    opened.push(messaging);
    expect(await messaging.requests.request(syncSubjects.lease('acme'), { ask: 2 }, 2000)).toEqual({
      answered: 'svc.acme.leases.request',
    });
  });

  it('gets no answer on the shared inbox the credentials do not allow', async () => {
    const messaging = await proxy({ nats_inbox_prefix: '_INBOX' });
    await expect(messaging.requests.request(syncSubjects.lease('acme'), { ask: 1 }, 1000)).rejects.toMatchObject({
      code: 'SVC-SYS-9001',
    });
  });
});
