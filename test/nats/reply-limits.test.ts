import { connect, type NatsConnection } from 'nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BusLogger } from '../../core/bus/bus.ts';
import { NatsRequests, REPLY_LIMITS } from '../../core/bus/nats-requests.ts';
import { eventually } from '../harness/eventually.ts';
import { startNatsServer, type NatsServer } from '../harness/nats-server.ts';

const quiet: BusLogger = { warn: () => undefined, error: () => undefined };
const lease = (tenant: string) => `svc.${tenant}.leases.request`;

describe('reply handlers in flight over nats-server', () => {
  let server: NatsServer;
  let nc: NatsConnection;

  beforeAll(async () => {
    server = await startNatsServer();
    nc = await connect({ servers: server.url });
  });
  afterAll(async () => {
    await nc.close();
    await server.dispose();
  });

  /** A replier whose handlers for `stalled` tenants wait until released; it counts those waiting. */
  async function replier(requests: NatsRequests, stalled: string[]) {
    const release = Promise.withResolvers<void>();
    const waiting = { count: 0 };
    const subscription = await requests.reply(lease('*'), async (_data, subject) => {
      if (stalled.some((tenant) => subject === lease(tenant))) {
        waiting.count++;
        await release.promise;
      }
      return { subject };
    });
    return { waiting, release: () => release.resolve(), subscription };
  }

  it("answers one tenant's request past its limit with SVC-SYS-9001 at once, and still serves another tenant", async () => {
    const requests = new NatsRequests(nc, quiet);
    const { waiting, release, subscription } = await replier(requests, ['acme']);
    const held = Array.from({ length: REPLY_LIMITS.perTenant }, () => requests.request(lease('acme'), {}, 10_000));
    await eventually(
      () => waiting.count,
      (n) => n === REPLY_LIMITS.perTenant,
    );
    await expect(requests.request(lease('acme'), {}, 2_000)).rejects.toMatchObject({
      code: 'SVC-SYS-9001',
      message: expect.stringContaining('in flight') as unknown,
    });
    await expect(requests.request(lease('globex'), {}, 2_000)).resolves.toEqual({ subject: lease('globex') });
    release();
    await expect(Promise.all(held)).resolves.toHaveLength(REPLY_LIMITS.perTenant);
    // The slots are given back once the handlers are done.
    await expect(requests.request(lease('acme'), {}, 2_000)).resolves.toEqual({ subject: lease('acme') });
    await subscription.unsubscribe();
  });

  it('bounds the handlers of one subscription in all, across tenants', async () => {
    const requests = new NatsRequests(nc, quiet, { perTenant: 2, total: 3 });
    const { waiting, release, subscription } = await replier(requests, ['acme', 'globex']);
    const held = ['acme', 'acme', 'globex'].map((tenant) => requests.request(lease(tenant), {}, 10_000));
    await eventually(
      () => waiting.count,
      (n) => n === 3,
    );
    await expect(requests.request(lease('initech'), {}, 2_000)).rejects.toMatchObject({
      code: 'SVC-SYS-9001',
      message: expect.stringContaining('in flight') as unknown,
    });
    release();
    await Promise.all(held);
    await expect(requests.request(lease('initech'), {}, 2_000)).resolves.toEqual({ subject: lease('initech') });
    await subscription.unsubscribe();
  });
});
