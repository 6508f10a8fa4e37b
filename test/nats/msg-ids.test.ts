import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BusMessage } from '../../core/bus/bus.ts';
import { openNatsMessaging } from '../../core/bus/nats-messaging.ts';
import type { OutboxEvent } from '../../core/outbox/outbox-storage.ts';
import { EventRecorder } from '../../proxy/governance/event-recorder.ts';
import { eventually, startControlPlane, tenantWithKey, type RunningControlPlane } from '../harness/control-plane.ts';
import { startNatsServer, type NatsServer } from '../harness/nats-server.ts';

/**
 * Every tenant publishes into one JetStream stream, which keeps one message per msg id within its
 * duplicate window. A REST caller chooses its events' ids; none of them may take the msg id of a
 * message the product publishes (its own announcements, a proxy's), in its tenant or another.
 */
let nats: NatsServer;
let cp: RunningControlPlane;
let victim: string;
let mallory: string;

beforeAll(async () => {
  nats = await startNatsServer();
  cp = await startControlPlane({}, undefined, () =>
    openNatsMessaging({ connection: { servers: nats.url, name: 'msg-ids' } }, pino({ level: 'silent' })),
  );
  victim = await tenantWithKey(cp, 'victim');
  mallory = await tenantWithKey(cp, 'mallory');
}, 30_000);

afterAll(async () => {
  await cp.close();
  await nats.dispose();
});

/** How long a message the stream took takes to reach the harness's subscription, at most. */
const ARRIVAL_MS = 5_000;

function on(subject: string, match: (m: BusMessage) => boolean): BusMessage[] {
  return cp.published.filter((m) => m.subject === subject && match(m));
}

async function announced(subject: string, match: (m: BusMessage) => boolean): Promise<BusMessage> {
  const [first] = await eventually(
    () => on(subject, match),
    (found) => found.length > 0,
    ARRIVAL_MS,
  );
  return first!;
}

async function budget(key: string): Promise<string> {
  const res = await cp.call('POST', '/v1/budgets', {
    key,
    body: { name: 'b', type: 'cost', limits: { max_cost_usd: 5 } },
  });
  expect(res.status).toBe(201);
  return res.body.budget_id as string;
}

async function envelope(key: string, budgetId?: string): Promise<string> {
  const body = budgetId === undefined ? { adapter_type: 'custom' } : { budget_id: budgetId, adapter_type: 'custom' };
  const res = await cp.call('POST', '/v1/envelopes', { key, body });
  expect(res.status).toBe(201);
  return res.body.envelope_id as string;
}

async function recordEvent(key: string, envelopeId: string, eventId: string) {
  const res = await cp.call('POST', `/v1/envelopes/${envelopeId}/events`, {
    key,
    body: { event_id: eventId, event_type: 'custom.note', timestamp: new Date().toISOString() },
  });
  expect(res.status).toBe(202);
  return res.body as { event_id: string; duplicate: boolean };
}

const dataOf = (m: BusMessage) => m.data as Record<string, unknown>;

describe('msg ids on the shared event stream', () => {
  it("another tenant's event ids cannot take the msg id of a tenant's budget deletion", async () => {
    // The id the product gives one deletion shows what it gives the next.
    const first = await budget(victim);
    expect((await cp.call('DELETE', `/v1/budgets/${first}`, { key: victim })).status).toBe(200);
    const seen = await announced('svc.victim.budgets.deleted', (m) => dataOf(m).budget_id === first);

    const second = await budget(victim);
    const predicted = seen.msgId.replaceAll(first, second);
    await recordEvent(mallory, await envelope(mallory), predicted);

    expect((await cp.call('DELETE', `/v1/budgets/${second}`, { key: victim })).status).toBe(200);
    await announced('svc.victim.budgets.deleted', (m) => dataOf(m).budget_id === second);
  }, 30_000);

  it("an agent's event ids cannot take the msg id of its own envelope's termination", async () => {
    const agent = await tenantWithKey(cp, 'victim', ['envelopes:write', 'envelopes:read']);
    const first = await envelope(agent);
    expect((await cp.call('POST', `/v1/envelopes/${first}/terminate`, { key: victim, body: {} })).status).toBe(200);
    const seen = await announced('svc.victim.envelopes.terminated', (m) => dataOf(m).envelope_id === first);

    const second = await envelope(agent);
    await recordEvent(agent, second, seen.msgId.replaceAll(first, second));
    expect((await cp.call('POST', `/v1/envelopes/${second}/terminate`, { key: victim, body: {} })).status).toBe(200);
    await announced('svc.victim.envelopes.terminated', (m) => dataOf(m).envelope_id === second);
  }, 30_000);

  it("an agent's event ids cannot take the msg id of the proxy's message that its envelope ended", async () => {
    const agent = await tenantWithKey(cp, 'victim', ['envelopes:write', 'envelopes:read']);
    const budgetId = await budget(victim);
    const envelopeId = await envelope(agent, budgetId);
    // The proxy's own recorder names the message, as it would write it to its outbox.
    const written: OutboxEvent[] = [];
    const recorder = new EventRecorder(
      'victim',
      'proxy:pod-a',
      {
        append: (event) => Promise.resolve(void written.push(event)),
        reserveRoom: () => Promise.resolve(null),
      },
      { put: () => Promise.resolve(), remove: () => Promise.resolve(), all: () => [] },
      { error: () => undefined },
    );
    await recorder.ended(
      { envelopeId, executionId: envelopeId, budgetId, ending: null, paused: null, inflight: new Set() },
      'BUDGET_EXCEEDED',
      'budget exhausted',
    );
    const [ended] = written;

    await recordEvent(agent, envelopeId, ended!.id);
    await cp.messaging.bus.publish(ended!.subject, ended!.data, { msgId: ended!.id });
    await announced('svc.victim.envelopes.terminated', (m) => dataOf(m).envelope_id === envelopeId);
    const state = async () => String((await cp.call('GET', `/v1/envelopes/${envelopeId}`, { key: victim })).body.state);
    expect(await eventually(state, (s) => s === 'TERMINATED', ARRIVAL_MS)).toBe('TERMINATED');
  }, 30_000);

  it('an event id is one event per tenant: sent twice it counts once, and two tenants may each use it', async () => {
    const eventId = 'shared-event-id-1';
    const victimEnvelope = await envelope(victim);
    const malloryEnvelope = await envelope(mallory);
    expect(await recordEvent(victim, victimEnvelope, eventId)).toMatchObject({ event_id: eventId, duplicate: false });
    expect(await recordEvent(victim, victimEnvelope, eventId)).toMatchObject({ event_id: eventId, duplicate: true });
    expect(await recordEvent(mallory, malloryEnvelope, eventId)).toMatchObject({ event_id: eventId, duplicate: false });

    const both = (m: BusMessage) => dataOf(m).event_id === eventId;
    await announced('svc.mallory.events.custom.note', both);
    await announced('svc.victim.events.custom.note', both);
    // Nothing more arrives for the victim's second send.
    await new Promise((r) => setTimeout(r, 500));
    expect(on('svc.victim.events.custom.note', both)).toHaveLength(1);
  }, 30_000);
});
