import { fileURLToPath } from 'node:url';
import { connect, type NatsConnection } from 'nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BusLogger, KeyValueEntry, Messaging } from '../../core/bus/bus.ts';
import { openNatsMessaging } from '../../core/bus/nats-messaging.ts';
import { subjects } from '../../core/bus/subjects.ts';
import { BUCKETS, keys, syncSubjects } from '../../core/sync/contract.ts';
import { startNatsServer, type NatsServer } from '../harness/nats-server.ts';

const quiet: BusLogger = { warn: () => undefined, error: () => undefined };
const CONFIG = fileURLToPath(new URL('../../config/nats/tenant-isolation.conf', import.meta.url));

describe('tenant isolation by nats-server permissions (config/nats/tenant-isolation.conf)', () => {
  let server: NatsServer;
  let controlPlane: Messaging;
  let acme: Messaging;
  /** Tenant A's credentials on a raw client: what an attacker holding them could send. */
  let raw: NatsConnection;
  /** Subjects of the lease requests the control plane's replier handled. */
  const leaseRequests: string[] = [];

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
    const holds = await controlPlane.keyValue.open(BUCKETS.holds, { maxAgeMs: 3_600_000 });
    await holds.put(keys.hold('acme', 'e-acme'), { status: 'PAUSED' });
    await holds.put(keys.hold('globex', 'e-globex'), { status: 'TERMINATED' });
    await controlPlane.requests.reply(syncSubjects.lease('*'), (data, subject) => {
      leaseRequests.push(subject);
      return Promise.resolve({ granted: (data as { tokens: number }).tokens });
    });
    acme = await openNatsMessaging(
      {
        connection: { servers: server.url, user: 'proxy-acme', pass: 'proxy-acme-secret', inboxPrefix: '_INBOX_acme' },
        bus: { publishTimeoutMs: 1_000 },
        manage: false,
      },
      quiet,
    );
    raw = await connect({
      servers: server.url,
      user: 'proxy-acme',
      pass: 'proxy-acme-secret',
      inboxPrefix: '_INBOX_acme',
    });
  });
  afterAll(async () => {
    await raw.close();
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

  /** Sends as tenant A; resolves with how the server answered. */
  async function send(subject: string, body: unknown = {}): Promise<string> {
    try {
      const reply = await raw.request(subject, new TextEncoder().encode(JSON.stringify(body)), { timeout: 1_000 });
      return `answered: ${new TextDecoder().decode(reply.data)}`;
    } catch (error) {
      return /Permissions Violation for Publish/.test((error as Error).message) ? 'refused' : 'not refused';
    }
  }

  it("refuses tenant A's credentials every other way into tenant B's events, the stream, the dead letters, and the control plane's own subjects", async () => {
    const refusedSubjects = [
      // another tenant's events and lease requests
      'svc.globex.events.llm.call',
      'svc.globex.envelopes.created',
      'svc.globex.leases.request',
      'svc.globex.approvals.request',
      // the stream and its consumers through the JetStream API: read, create, purge, delete
      '$JS.API.STREAM.INFO.SVC_EVENTS',
      '$JS.API.STREAM.PURGE.SVC_EVENTS',
      '$JS.API.STREAM.MSG.GET.SVC_EVENTS',
      '$JS.API.STREAM.UPDATE.SVC_EVENTS',
      '$JS.API.CONSUMER.CREATE.SVC_EVENTS',
      '$JS.API.CONSUMER.CREATE.SVC_EVENTS.reader.svc.globex.events.>',
      '$JS.API.CONSUMER.DURABLE.CREATE.SVC_EVENTS.event-processor',
      '$JS.API.CONSUMER.MSG.NEXT.SVC_EVENTS.event-processor',
      // the dead letters, which are not in any tenant's subjects
      'deadletter.svc.globex.events.llm.call',
      '$JS.API.STREAM.MSG.GET.SVC_DEAD_LETTERS',
      // key-value writes, of tenant B's keys as of its own
      '$KV.svc_rulesets.ruleset.globex',
      '$KV.svc_budgets.budget.globex.b2',
      '$JS.API.STREAM.PURGE.KV_svc_budgets',
      '$KV.svc_holds.hold.globex.e-globex',
      '$KV.svc_holds.hold.acme.e-acme',
      '$JS.API.STREAM.PURGE.KV_svc_holds',
      '$JS.API.STREAM.UPDATE.KV_svc_holds',
      // what only the control plane sends: terminate signals and budget alerts, even of tenant A
      'svc.acme.signals.terminate',
      'svc.acme.budgets.exceeded',
      'svc.acme.envelopes.completed',
      // the control-plane replicas' counts, which a proxy could forge to have others refused
      'svc.system.auth-failures',
      'svc.system.request-counts',
    ];
    const answers = Object.fromEntries(await Promise.all(refusedSubjects.map(async (s) => [s, await send(s)])));
    expect(answers).toEqual(Object.fromEntries(refusedSubjects.map((s) => [s, 'refused'])));
    // Its status reports (spec 6.2) go out on the shared system subjects.
    expect(await send('svc.system.health')).toBe('not refused');
    expect(await send('svc.system.metrics')).toBe('not refused');

    // A watch consumer whose filter reaches past tenant A's keys is refused by the server itself.
    const wider = await send('$JS.API.CONSUMER.CREATE.KV_svc_budgets.sneak.$KV.svc_budgets.budget.acme.>', {
      stream_name: 'KV_svc_budgets',
      config: {
        name: 'sneak',
        filter_subject: '$KV.svc_budgets.>',
        deliver_subject: '_INBOX_acme.sneak',
        ack_policy: 'none',
      },
    });
    expect(wider).toContain('did not match filtered subject');
    // A direct get on tenant A's key cannot ask for another message in its body.
    const byBody = await send('$JS.API.DIRECT.GET.KV_svc_budgets.$KV.svc_budgets.budget.acme.b1', {
      last_by_subj: '$KV.svc_budgets.budget.globex.b2',
    });
    expect(byBody).not.toContain('remaining');
    // Nor can a watch of its own holds reach tenant B's, nor a direct get ask for them by body.
    const widerHolds = await send('$JS.API.CONSUMER.CREATE.KV_svc_holds.sneak.$KV.svc_holds.hold.acme.>', {
      stream_name: 'KV_svc_holds',
      config: {
        name: 'sneak',
        filter_subject: '$KV.svc_holds.hold.>',
        deliver_subject: '_INBOX_acme.sneak-holds',
        ack_policy: 'none',
      },
    });
    expect(widerHolds).toContain('did not match filtered subject');
    const holdByBody = await send('$JS.API.DIRECT.GET.KV_svc_holds.$KV.svc_holds.hold.acme.e-acme', {
      last_by_subj: '$KV.svc_holds.hold.globex.e-globex',
    });
    expect(holdByBody).not.toContain('TERMINATED');

    const cp = await controlPlane.keyValue.open(BUCKETS.rulesets);
    expect(await cp.get(keys.ruleset('globex'))).toMatchObject({ value: { version: 7 } });
    const budgets = await controlPlane.keyValue.open(BUCKETS.budgets);
    expect(await budgets.get(keys.budget('globex', 'b2'))).toMatchObject({ value: { remaining: 20 } });
  });

  it("keeps out of tenant B's signals, lease requests and the replicas' counts what a watch consumer of tenant A is told to deliver there", async () => {
    const globex = await openNatsMessaging(
      {
        connection: {
          servers: server.url,
          user: 'proxy-globex',
          pass: 'proxy-globex-secret',
          inboxPrefix: '_INBOX_globex',
        },
        manage: false,
      },
      quiet,
    );
    const rulesets = await controlPlane.keyValue.open(BUCKETS.rulesets);
    const observer = await connect({ servers: server.url, user: 'control-plane', pass: 'control-plane-secret' });
    try {
      const signals: unknown[] = [];
      await globex.signals.subscribeSignals(syncSubjects.terminate('globex'), (data) => void signals.push(data));
      await globex.requests.request(syncSubjects.lease('globex'), { tokens: 1 }, 2_000); // the subscription is registered
      // The replicas' counts are heard as signals (control-plane/auth/shared-minute-counts.ts).
      const counts: unknown[] = [];
      const delivered: string[] = [];
      for (const subject of [subjects.authFailures, subjects.requestCounts]) {
        await controlPlane.signals.subscribeSignals(subject, (data) => void counts.push(data));
        observer.subscribe(subject, { callback: (_error, msg) => void delivered.push(`${subject} ${msg.reply}`) });
      }
      await observer.flush();
      // nats-server does not check a push consumer's deliver subject against its creator's permissions.
      for (const [name, target] of [
        ['to_signals', syncSubjects.terminate('globex')],
        ['to_leases', syncSubjects.lease('globex')],
        ['to_failures', subjects.authFailures],
        ['to_counts', subjects.requestCounts],
      ] as const) {
        const created = await send(`$JS.API.CONSUMER.CREATE.KV_svc_rulesets.${name}.$KV.svc_rulesets.ruleset.acme`, {
          stream_name: 'KV_svc_rulesets',
          config: {
            name,
            filter_subject: '$KV.svc_rulesets.ruleset.acme',
            deliver_subject: target,
            deliver_policy: 'all',
            ack_policy: 'none',
          },
        });
        expect(created).toContain('consumer_create_response');
      }
      await rulesets.put(keys.ruleset('acme'), { version: 2 });
      await controlPlane.signals.publishSignal(syncSubjects.terminate('globex'), { envelope_id: 'real' });
      const deadline = Date.now() + 2_000;
      while (signals.length < 1 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(signals).toEqual([{ envelope_id: 'real' }]);
      expect(leaseRequests.filter((subject) => subject === syncSubjects.lease('globex'))).toHaveLength(1);
      // The server did deliver tenant A's entries there, as JetStream messages; no replica counted them.
      for (const subject of [subjects.authFailures, subjects.requestCounts])
        expect(delivered.filter((line) => line.startsWith(`${subject} $JS.ACK.`)).length).toBeGreaterThan(0);
      expect(counts).toEqual([]);
    } finally {
      await observer.close();
      await rulesets.put(keys.ruleset('acme'), { version: 1 });
      await globex.close();
    }
  });

  it('lets tenant A publish every subject a proxy publishes', async () => {
    for (const subject of [
      'svc.acme.events.tool.invoke',
      'svc.acme.envelopes.created',
      'svc.acme.envelopes.terminated',
      'svc.acme.policies.violation',
    ]) {
      await expect(acme.bus.publish(subject, { probe: true })).resolves.toBeUndefined();
    }
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

    const holds = await acme.keyValue.open(BUCKETS.holds);
    expect(await holds.get(keys.hold('acme', 'e-acme'))).toMatchObject({ value: { status: 'PAUSED' } });
    await expect(holds.get(keys.hold('globex', 'e-globex'))).rejects.toMatchObject({ code: 'SVC-SYS-9001' });
    const held: KeyValueEntry[] = [];
    const holdWatch = await holds.watch(keys.holdFilter('acme'), (entry) => void held.push(entry));
    expect(held.map((e) => [e.key, e.value])).toEqual([['hold.acme.e-acme', { status: 'PAUSED' }]]);
    await holdWatch.unsubscribe();
    await expect(holds.watch(keys.holdFilter('globex'), () => undefined)).rejects.toMatchObject({
      code: 'SVC-SYS-9001',
    });
    await expect(holds.watch('hold.>', () => undefined)).rejects.toMatchObject({ code: 'SVC-SYS-9001' });
  });

  it("cannot write tenant A's keys either: the control plane owns the synced state", async () => {
    const rulesets = await acme.keyValue.open(BUCKETS.rulesets);
    await expect(rulesets.put(keys.ruleset('acme'), { version: 99 })).rejects.toMatchObject({ code: 'SVC-SYS-9001' });
    const cp = await controlPlane.keyValue.open(BUCKETS.rulesets);
    expect(await cp.get(keys.ruleset('acme'))).toMatchObject({ value: { version: 1 } });
  });

  it("answers a request only on its tenant's inbox, so the control plane writes nowhere else for it", async () => {
    const admin = await connect({ servers: server.url, user: 'control-plane', pass: 'control-plane-secret' });
    try {
      const jsm = await admin.jetstreamManager();
      const bus = await controlPlane.keyValue.open(BUCKETS.holds);
      await controlPlane.bus.publish('svc.globex.events.llm.call', { n: 1 }, { msgId: 'reply-walk-1' });
      const stored = async () => (await jsm.streams.info('SVC_EVENTS')).state.messages;
      const before = await stored();
      expect(before).toBeGreaterThan(0);
      const handled = leaseRequests.length;
      // The server lets tenant A name any reply subject; the answer would be published with the
      // control plane's rights, which reach the JetStream API, every key and every tenant.
      for (const reply of [
        '$JS.API.STREAM.PURGE.SVC_EVENTS',
        '$JS.API.STREAM.PURGE.KV_svc_holds',
        '$KV.svc_holds.hold.globex.e-globex',
        'svc.globex.signals.terminate',
        '_INBOX_globex.stolen',
        '_INBOX_acmecorp.near-miss',
      ])
        raw.publish(syncSubjects.lease('acme'), new TextEncoder().encode(JSON.stringify({ tokens: 1 })), { reply });
      // A request with no reply at all grants nothing either: nobody would receive it.
      raw.publish(syncSubjects.lease('acme'), new TextEncoder().encode(JSON.stringify({ tokens: 1 })));
      await raw.flush();
      // The replier still answers tenant A's own inbox, after every request above was delivered.
      await expect(acme.requests.request(syncSubjects.lease('acme'), { tokens: 3 }, 2_000)).resolves.toEqual({
        granted: 3,
      });
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(leaseRequests.length - handled).toBe(1);
      expect(await stored()).toBe(before);
      expect(await bus.get(keys.hold('globex', 'e-globex'))).toMatchObject({ value: { status: 'TERMINATED' } });
      expect((await jsm.streams.info('KV_svc_holds')).state.messages).toBeGreaterThanOrEqual(2);
    } finally {
      await admin.close();
    }
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
