import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { subjects } from '../../core/bus/subjects.ts';
import {
  eventually,
  expectSvcError,
  startControlPlane,
  tenantWithKey,
  type RunningControlPlane,
} from '../harness/control-plane.ts';
import { withOffset } from '../harness/offset-time.ts';

/**
 * Date-times over REST, on the storage SVC_TEST_STORAGE names: whatever offset or digits of a
 * second a time is written with, it is kept and answered in UTC with three digits, so that lists
 * ordered and filtered by the stored text come in time order.
 */
let cp: RunningControlPlane;
let key: string;

beforeAll(async () => {
  cp = await startControlPlane();
  key = await tenantWithKey(cp, 'timeco');
});
afterAll(async () => cp?.close());

const traceIds = async (): Promise<string[]> =>
  ((await cp.call('GET', '/api/v1/traces?limit=100', { key })).body.traces as Array<{ trace_id: string }>).map(
    (t) => t.trace_id,
  );

describe('date-times over REST', () => {
  it("lists an envelope a proxy opened at a time written with an offset in time order beside the control plane's own", async () => {
    const made = await cp.call('POST', '/v1/envelopes', { key, body: { adapter_type: 'custom' } });
    expect(made.status).toBe(201);
    const own = made.body.envelope_id as string;
    const ownAt = made.body.created_at as string;
    // A minute before the envelope made over REST, written 5 hours east of UTC: by text it sorts
    // after it, by time before it.
    const opened = {
      tenant_id: 'timeco',
      envelope_id: randomUUID(),
      execution_id: 'exec-east',
      budget_id: null,
      status: 'AUTHORIZED',
      source: 'proxy:pod-a',
      occurred_at: withOffset(Date.parse(ownAt) - 60_000, 300),
    };
    await cp.messaging.bus.publish(subjects.envelopeCreated('timeco'), opened, { msgId: randomUUID() });
    const read = await eventually(
      () => cp.call('GET', `/v1/envelopes/${opened.envelope_id}`, { key }),
      (r) => r.status === 200,
    );
    expect(read.body.created_at).toBe(new Date(Date.parse(ownAt) - 60_000).toISOString());
    const ids = await traceIds();
    expect(ids.indexOf(own)).toBeLessThan(ids.indexOf(opened.envelope_id));
    expect(ids.indexOf(own)).toBeGreaterThanOrEqual(0);
    // The page after the own envelope starts at the opened one: the page key is the stored text.
    const first = await cp.call('GET', `/api/v1/traces?limit=${String(ids.indexOf(own) + 1)}`, { key });
    const next = await cp.call('GET', `/api/v1/traces?limit=1&page_token=${String(first.body.next_page_token)}`, {
      key,
    });
    expect(next.body.traces[0].trace_id).toBe(opened.envelope_id);
  });

  it('answers an event written with an offset and nine digits of a second in UTC with three', async () => {
    const made = await cp.call('POST', '/v1/envelopes', { key, body: { adapter_type: 'custom' } });
    const envelopeId = made.body.envelope_id as string;
    const at = Date.now() - 5_000;
    const timestamp = withOffset(at, -330).replace(/000000(?=[+-])/, '999999');
    const posted = await cp.call('POST', `/v1/envelopes/${envelopeId}/events`, {
      key,
      body: { event_type: 'tool.invoke', timestamp, cost_usd: 0 },
    });
    expect(posted.status).toBe(202);
    const events = await eventually(
      () => cp.call('GET', `/v1/events?envelope_id=${envelopeId}`, { key }),
      (r) => r.status === 200 && (r.body as unknown[]).length === 1,
    );
    // Cut, not rounded: .xxx999999 stays in its millisecond.
    expect(events.body[0].timestamp).toBe(new Date(at).toISOString());
    const trace = await cp.call('GET', `/api/v1/traces/${envelopeId}`, { key });
    expect(trace.body.events[0].timestamp).toBe(new Date(at).toISOString());
  });

  it("answers a budget's expiry written with an offset in UTC", async () => {
    const expires = Date.parse('2099-06-01T00:00:00.000Z');
    const budget = await cp.call('POST', '/v1/budgets', {
      key,
      body: { name: 'later', type: 'cost', limits: { max_cost_usd: 1 }, expires_at: withOffset(expires, 120) },
    });
    expect(budget.status).toBe(201);
    expect(budget.body.expires_at).toBe('2099-06-01T00:00:00.000Z');
    const read = await cp.call('GET', `/v1/budgets/${String(budget.body.budget_id)}`, { key });
    expect(read.body.expires_at).toBe('2099-06-01T00:00:00.000Z');
  });

  it('refuses a time whose year leaves 0000-9999 once in UTC, naming the field', async () => {
    const made = await cp.call('POST', '/v1/envelopes', { key, body: { adapter_type: 'custom' } });
    const refused = await cp.call('POST', `/v1/envelopes/${String(made.body.envelope_id)}/events`, {
      key,
      body: { event_type: 'tool.invoke', timestamp: '9999-12-31T23:30:00-01:00', cost_usd: 0 },
    });
    expect(expectSvcError(refused, 400, 'SVC-SYS-9002').details).toMatchObject({ fields: 'timestamp' });
    // Nothing of the refused event was recorded.
    expect((await cp.call('GET', `/v1/events?envelope_id=${String(made.body.envelope_id)}`, { key })).body).toEqual([]);
    const since = await cp.call(
      'GET',
      `/v1/brain/immune-system/detections?since=${encodeURIComponent('0000-01-01T00:00:00+00:01')}`,
      { key },
    );
    expect(expectSvcError(since, 400, 'SVC-SYS-9002').details).toMatchObject({ fields: 'since' });
  });
});
