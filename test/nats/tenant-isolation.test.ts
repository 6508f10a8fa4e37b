import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BusLogger, KeyValueEntry, Messaging } from '../../core/bus/bus.ts';
import { openNatsMessaging } from '../../core/bus/nats-messaging.ts';
import { BUCKETS, keys, syncSubjects } from '../../core/sync/contract.ts';
import { startNatsServer, type NatsServer } from '../harness/nats-server.ts';

const quiet: BusLogger = { warn: () => undefined, error: () => undefined };
const CONFIG = fileURLToPath(new URL('../../config/nats/tenant-isolation.conf', import.meta.url));

describe('tenant isolation by nats-server permissions (config/nats/tenant-isolation.conf)', () => {
  let server: NatsServer;
  let controlPlane: Messaging;
  let acme: Messaging;

  beforeAll(async () => {
    server = await startNatsServer({ configFile: CONFIG });
    controlPlane = await openNatsMessaging(
      { connection: { servers: server.url, user: 'control-plane', pass: 'control-plane-secret' } },
      quiet,
    );
    const rulesets = await controlPlane.keyValue.open(BUCKETS.rulesets);
    await rulesets.put(keys.ruleset('acme'), { version: 1 });
    await rulesets.put(keys.ruleset('globex'), { version: 7 });
    const budgets = await controlPlane.keyValue.open(BUCKETS.budgets);
    await budgets.put(keys.budget('acme', 'b1'), { remaining: 10 });
    await budgets.put(keys.budget('globex', 'b2'), { remaining: 20 });
    await controlPlane.requests.reply(syncSubjects.lease('*'), (data) =>
      Promise.resolve({ granted: (data as { tokens: number }).tokens }),
    );
    acme = await openNatsMessaging(
      {
        connection: { servers: server.url, user: 'proxy-acme', pass: 'proxy-acme-secret', inboxPrefix: '_INBOX_acme' },
        bus: { publishTimeoutMs: 1_000 },
        manage: false,
      },
      quiet,
    );
  });
  afterAll(async () => {
    await acme.close();
    await controlPlane.close();
    await server.dispose();
  });

  it('lets tenant A publish its own events and refuses tenant B subjects with SVC-EVT-4001', async () => {
    await expect(
      acme.bus.publish('svc.acme.events.llm.call', { tokens: 1 }, { msgId: 'a-1' }),
    ).resolves.toBeUndefined();
    await expect(acme.bus.publish('svc.globex.events.llm.call', { tokens: 1 }, { msgId: 'a-2' })).rejects.toMatchObject(
      { code: 'SVC-EVT-4001' },
    );

    const stored: string[] = [];
    const sub = await controlPlane.bus.subscribe(
      'svc.*.events.>',
      (m) => Promise.resolve(void stored.push(m.subject)),
      { durable: 'isolation_check' },
    );
    const deadline = Date.now() + 3_000;
    while (stored.length < 1 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    await new Promise((resolve) => setTimeout(resolve, 300));
    await sub.unsubscribe();
    expect(stored).toEqual(['svc.acme.events.llm.call']);
  });

  it("reads and watches tenant A's keys but not tenant B's", async () => {
    const rulesets = await acme.keyValue.open(BUCKETS.rulesets);
    expect(await rulesets.get(keys.ruleset('acme'))).toMatchObject({ value: { version: 1 } });
    await expect(rulesets.get(keys.ruleset('globex'))).rejects.toMatchObject({ code: 'SVC-SYS-9001' });

    const budgets = await acme.keyValue.open(BUCKETS.budgets);
    expect(await budgets.get(keys.budget('acme', 'b1'))).toMatchObject({ value: { remaining: 10 } });
    await expect(budgets.get(keys.budget('globex', 'b2'))).rejects.toMatchObject({ code: 'SVC-SYS-9001' });

    const seen: KeyValueEntry[] = [];
    const watch = await budgets.watch(keys.budgetFilter('acme'), (entry) => void seen.push(entry));
    expect(seen.map((e) => e.value)).toEqual([{ remaining: 10 }]);
    await watch.unsubscribe();
    const rulesetWatch = await rulesets.watch(keys.ruleset('acme'), (entry) => void seen.push(entry));
    expect(seen.map((e) => e.value)).toEqual([{ remaining: 10 }, { version: 1 }]);
    await rulesetWatch.unsubscribe();
    await expect(budgets.watch(keys.budgetFilter('globex'), () => undefined)).rejects.toMatchObject({
      code: 'SVC-SYS-9001',
    });
  });

  it("cannot write tenant A's keys either: the control plane owns the synced state", async () => {
    const rulesets = await acme.keyValue.open(BUCKETS.rulesets);
    await expect(rulesets.put(keys.ruleset('acme'), { version: 99 })).rejects.toMatchObject({ code: 'SVC-SYS-9001' });
    const cp = await controlPlane.keyValue.open(BUCKETS.rulesets);
    expect(await cp.get(keys.ruleset('acme'))).toMatchObject({ value: { version: 1 } });
  });

  it('requests a lease and receives signals on its own subjects', async () => {
    await expect(acme.requests.request(syncSubjects.lease('acme'), { tokens: 500 }, 2_000)).resolves.toEqual({
      granted: 500,
    });
    await expect(acme.requests.request(syncSubjects.lease('globex'), { tokens: 500 }, 1_000)).rejects.toMatchObject({
      code: 'SVC-SYS-9001',
    });
    const got: unknown[] = [];
    await acme.signals.subscribeSignals(syncSubjects.terminate('acme'), (data) => void got.push(data));
    await acme.requests.request(syncSubjects.lease('acme'), { tokens: 1 }, 2_000); // round-trip: the subscription is registered
    await controlPlane.signals.publishSignal(syncSubjects.terminate('acme'), { envelope_id: 'e1' });
    const deadline = Date.now() + 3_000;
    while (got.length < 1 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(got).toEqual([{ envelope_id: 'e1' }]);
  });
});
