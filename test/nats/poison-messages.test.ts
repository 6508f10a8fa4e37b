import { connect, type JetStreamManager, type NatsConnection } from 'nats';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BusLogger, BusMessage } from '../../core/bus/bus.ts';
import { openNatsMessaging } from '../../core/bus/nats-messaging.ts';
import { eventually } from '../harness/control-plane.ts';
import { startNatsServer, type NatsServer } from '../harness/nats-server.ts';
import {
  controlPlaneProcess,
  killAllProcesses,
  metricValue,
  removeDirs,
  seedFleetTenant,
  type ControlPlaneProcess,
} from '../harness/processes.ts';

const encoder = new TextEncoder();
const json = (value: unknown): Uint8Array => encoder.encode(JSON.stringify(value));

/** Every message of the dead-letter stream, oldest first. */
async function deadLetters(
  jsm: JetStreamManager,
): Promise<Array<{ subject: string; data: string; headers: Record<string, string> }>> {
  const info = await jsm.streams.info('SVC_DEAD_LETTERS');
  const out = [];
  for (let seq = info.state.first_seq; seq <= info.state.last_seq && info.state.messages > 0; seq++) {
    const stored = await jsm.streams.getMessage('SVC_DEAD_LETTERS', { seq });
    const headers: Record<string, string> = {};
    for (const [key, values] of stored.header ?? []) headers[key] = values[0] ?? '';
    out.push({ subject: stored.subject, data: new TextDecoder().decode(stored.data), headers });
  }
  return out;
}

describe('poison messages on NATS', () => {
  let server: NatsServer;
  let nc: NatsConnection;
  let jsm: JetStreamManager;

  beforeAll(async () => {
    server = await startNatsServer();
    nc = await connect({ servers: server.url });
    jsm = await nc.jetstreamManager();
  });
  afterAll(async () => {
    await killAllProcesses();
    await nc.close();
    await server.dispose();
  });

  it('sets aside a payload that is not JSON, copies it byte for byte to the dead-letter stream, and handles the rest of its batch', async () => {
    const logged: Array<Record<string, unknown>> = [];
    const logger: BusLogger = { warn: () => undefined, error: (object) => void logged.push(object) };
    const registry = new Registry();
    const messaging = await openNatsMessaging(
      { connection: { servers: server.url }, bus: { retryBackoffMs: 20 }, registry },
      logger,
    );
    const js = nc.jetstream();
    await js.publish('svc.raw.events.llm.call', json({ n: 1 }), { msgID: 'raw-1' });
    await js.publish('svc.raw.events.llm.call', encoder.encode('{"prompt":"secret words"'), { msgID: 'raw-2' });
    await js.publish('svc.raw.events.llm.call', json({ n: 3 }), { msgID: 'raw-3' });
    const got: BusMessage[] = [];
    await messaging.bus.consumeBatches('svc.raw.events.>', 'raw_reader', { batchSize: 10, maxWaitMs: 50 }, (batch) => {
      got.push(...batch);
      return Promise.resolve();
    });
    await eventually(
      () => got.map((m) => m.msgId),
      (ids) => ids.length === 2,
      5_000,
    );
    expect(got.map((m) => m.data)).toEqual([{ n: 1 }, { n: 3 }]);
    const letters = await eventually(
      () => deadLetters(jsm),
      (l) => l.length === 1,
      5_000,
    );
    expect(letters[0]).toMatchObject({
      subject: 'deadletter.svc.raw.events.llm.call',
      data: '{"prompt":"secret words"',
      headers: { 'Svc-Consumer': 'raw_reader', 'Svc-Reason': 'undecodable', 'Svc-Msg-Id': 'raw-2' },
    });
    const metric = await registry.getSingleMetric('svc_bus_poison_messages_total')?.get();
    expect(metric?.values).toEqual([{ labels: { consumer: 'raw_reader', reason: 'undecodable' }, value: 1 }]);
    expect(logged).toEqual([
      expect.objectContaining({ subject: 'svc.raw.events.llm.call', msg_id: 'raw-2', reason: 'undecodable' }),
    ]);
    expect(JSON.stringify(logged)).not.toContain('secret words');
    await messaging.close();
    // Nothing of the product reads the dead letters.
    expect((await jsm.streams.info('SVC_DEAD_LETTERS')).state.consumer_count).toBe(0);
  });

  describe('in the event processor of a control-plane process', () => {
    let cp: ControlPlaneProcess;
    afterAll(async () => {
      await cp?.stop();
      await removeDirs([cp?.dataDir]);
    });

    it('applies the good events of a batch and sets aside, one by one, the one that does not decode, and the ones that do not validate', async () => {
      cp = await controlPlaneProcess(server.url);
      await cp.start();
      const tenant = await seedFleetTenant(cp, 'acme', { max_tokens: 1_000_000 });
      const envelope = await cp.rest('POST', '/v1/envelopes', {
        tenant: 'acme',
        body: { budget_id: tenant.budgetId, adapter_type: 'custom' },
      });
      expect(envelope.status).toBe(201);
      const envelopeId = String(envelope.body.envelope_id);
      const event = (id: string, input: number) => ({
        event_id: id,
        tenant_id: 'acme',
        envelope_id: envelopeId,
        budget_id: tenant.budgetId,
        event_type: 'llm.call',
        timestamp: new Date().toISOString(),
        tokens: { input, output: 0 },
        cost_usd: 0,
        source: 'proxy:poison-test',
      });
      // Published while the control plane is down, so that its processor takes them in one batch.
      await cp.stop();
      const js = nc.jetstream();
      const subject = 'svc.acme.events.llm.call';
      await js.publish(subject, json(event('good-1', 1)), { msgID: 'good-1' });
      await js.publish(subject, json(event('good-2', 10)), { msgID: 'good-2' });
      await js.publish(subject, encoder.encode('not json at all'), { msgID: 'bad-undecodable' });
      await js.publish(subject, json({ ...event('bad-invalid', 5), tokens: { input: 'many' } }), {
        msgID: 'bad-invalid',
      });
      await js.publish(subject, json({ ...event('bad-tenant', 5), tenant_id: 'globex' }), { msgID: 'bad-tenant' });
      // An id longer than any storage key takes is refused by the schema, before any transaction.
      await js.publish(subject, json(event(`long-${'x'.repeat(3_000)}`, 1_000)), { msgID: 'bad-long-id' });
      await js.publish(subject, json(event('good-3', 100)), { msgID: 'good-3' });
      await cp.start();

      const usage = async () =>
        (await cp.rest('GET', `/v1/budgets/${tenant.budgetId}/usage`, { tenant: 'acme' })).body as {
          tokens_input: number;
          llm_calls: number;
        };
      const applied = await eventually(usage, (u) => u.llm_calls >= 3, 30_000);
      expect(applied).toMatchObject({ tokens_input: 111, llm_calls: 3 });

      const poison = async (reason: string) =>
        metricValue(
          (await cp.rest('GET', '/metrics')).body as string,
          'svc_bus_poison_messages_total',
          `consumer="event-processor",reason="${reason}"`,
        );
      await eventually(
        () => poison('refused'),
        (v) => v === 3,
        30_000,
      );
      expect(await poison('undecodable')).toBe(1);

      const letters = (await deadLetters(jsm)).filter((l) => l.subject.startsWith('deadletter.svc.acme.'));
      const byId = new Map(letters.map((l) => [l.headers['Svc-Msg-Id'], l]));
      expect([...byId.keys()].sort()).toEqual(['bad-invalid', 'bad-long-id', 'bad-tenant', 'bad-undecodable']);
      expect(byId.get('bad-invalid')?.headers).toMatchObject({
        'Svc-Consumer': 'event-processor',
        'Svc-Reason': 'refused',
        'Svc-Detail': 'tokens.input: invalid_type; tokens.output: invalid_type',
      });
      expect(byId.get('bad-tenant')?.headers['Svc-Detail']).toBe('tenant_id: differs from the subject tenant');
      expect(byId.get('bad-long-id')?.headers['Svc-Detail']).toContain('event_id');
      expect(byId.get('bad-undecodable')?.data).toBe('not json at all');
      expect(cp.output()).not.toContain('not json at all');

      // The processor went on: a later event is applied at once.
      await js.publish(subject, json(event('good-4', 1_000)), { msgID: 'good-4' });
      await eventually(usage, (u) => u.llm_calls === 4 && u.tokens_input === 1_111, 10_000);
    }, 90_000);
  });
});
