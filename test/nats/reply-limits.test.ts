import { connect, type NatsConnection } from 'nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BusLogger } from '../../core/bus/bus.ts';
import { MemoryRequests } from '../../core/bus/memory-requests.ts';
import { NatsRequests } from '../../core/bus/nats-requests.ts';
import { REPLY_LIMITS, type ReplyLimits } from '../../core/bus/reply-limits.ts';
import { eventually } from '../harness/eventually.ts';
import { startNatsServer, type NatsServer } from '../harness/nats-server.ts';

const quiet: BusLogger = { warn: () => undefined, error: () => undefined };
const lease = (tenant: string) => `svc.${tenant}.leases.request`;

type Requests = NatsRequests | MemoryRequests;

/** Each transport with the same limits: standalone mode's in-process subjects must bound alike. */
describe.each([
  ['over nats-server', 'nats'],
  ['in process', 'memory'],
] as const)('reply and signal handlers in flight %s', (_label, transport) => {
  let server: NatsServer;
  let nc: NatsConnection;

  beforeAll(async () => {
    if (transport !== 'nats') return;
    server = await startNatsServer();
    nc = await connect({ servers: server.url });
  });
  afterAll(async () => {
    if (transport !== 'nats') return;
    await nc.close();
    await server.dispose();
  });

  const requestsWith = (logger: BusLogger, limits?: ReplyLimits): Requests =>
    transport === 'nats' ? new NatsRequests(nc, logger, limits) : new MemoryRequests(logger, limits);
  /** Lets what was published reach its subscribers (nothing to wait for in process). */
  const flush = () => (transport === 'nats' ? nc.flush() : Promise.resolve());

  /** A replier whose handlers for `stalled` tenants wait until released; it counts those waiting. */
  async function replier(requests: Requests, stalled: string[]) {
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
    const requests = requestsWith(quiet);
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
    const requests = requestsWith(quiet, { perTenant: 2, total: 3 });
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

  it('runs at most the limit of signal handlers of one tenant at once, dropping the rest with a warning', async () => {
    const warnings: string[] = [];
    const logger: BusLogger = { warn: (_fields, message) => void warnings.push(message), error: () => undefined };
    const signals = requestsWith(logger, { perTenant: 2, total: 3 });
    const release = Promise.withResolvers<void>();
    const started: string[] = [];
    let dropped = 0;
    const signal = (tenant: string) => `svc.${tenant}.signals.pause`;
    const subscription = await signals.subscribeSignals(
      signal('*'),
      async (data, subject) => {
        started.push(subject);
        if ((data as { hold?: boolean }).hold === true) await release.promise;
      },
      { dropped: () => void dropped++ },
    );
    for (let i = 0; i < 5; i++) await signals.publishSignal(signal('acme'), { hold: true });
    await signals.publishSignal(signal('globex'), { hold: true });
    await flush();
    await eventually(
      () => started.length,
      (n) => n === 3,
    );
    // Two of acme's and globex's one run; acme's other three were dropped, the total now full too.
    await signals.publishSignal(signal('initech'), {});
    await flush();
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(started.filter((subject) => subject === signal('acme'))).toHaveLength(2);
    expect(started).not.toContain(signal('initech'));
    expect(warnings).toEqual(['signals dropped: too many handlers in flight']);
    // The warning is throttled; the subscriber is told of every signal dropped.
    expect(dropped).toBe(4);
    release.resolve();
    // Done, the handlers give their slots back.
    await eventually(
      async () => {
        await signals.publishSignal(signal('initech'), {});
        return started.includes(signal('initech'));
      },
      (seen) => seen,
    );
    await subscription.unsubscribe();
  });
});
