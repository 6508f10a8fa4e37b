import { connect } from 'nats';
import type { APIError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SystemHealthMessageSchema, SystemMetricsMessageSchema } from '../../core/observability/system-reports.ts';
import { eventually } from '../harness/control-plane.ts';
import { startNatsPair, type NatsPair } from './nats-pair.ts';
import { openAiClient } from './sdk-options.ts';

let pair: NatsPair;

beforeAll(async () => {
  // Frequent system reports, for their test.
  pair = await startNatsPair({ system_report_interval_ms: 200 }, { system_report_interval_ms: 200 });
});
afterAll(async () => pair.close());

describe('proxy and control plane as separate processes over NATS', () => {
  it('syncs the ruleset, leases the budget and delivers usage to the envelope', async () => {
    await eventually(
      () => pair.proxy.rulesets.origin,
      (origin) => origin === 'sync',
      5000,
    );
    const { data, response } = await openAiClient(pair.agent, { 'X-Svc-Execution-Id': 'exec-nats' })
      .chat.completions.create({
        model: 'gpt-4o-mini',
        max_tokens: 5,
        messages: [{ role: 'user', content: 'over nats' }],
      })
      .withResponse();
    expect(data.usage?.completion_tokens).toBe(5);
    expect(
      pair.proxy.leases.peek(
        pair.proxy.envelopes.get(String(response.headers.get('x-svc-envelope-id')))?.budgetId ?? '',
      )?.mode,
    ).toBe('granted');
    const envelope = await eventually(
      () => pair.rest('GET', `/v1/envelopes/${response.headers.get('x-svc-envelope-id')}`),
      (r) => (r.body.cost_summary as { llm_calls?: number } | undefined)?.llm_calls === 1,
      5000,
    );
    expect(envelope.body.execution_id).toBe('exec-nats');
    // The usage event names the budget the call was charged to.
    const events = await pair.rest('GET', `/v1/events?envelope_id=${response.headers.get('x-svc-envelope-id')}`);
    expect((events.body as unknown as Array<{ event_type: string; budget_id: unknown }>)[0]).toMatchObject({
      event_type: 'llm.call',
      budget_id: envelope.body.budget_id,
    });
    expect(envelope.body.budget_id).toEqual(expect.any(String));

    await pair.addPolicy({ name: 'no-mini', rules: [{ action: 'llm:gpt-4o-mini', effect: 'deny' }], priority: 600 });
    let error: unknown;
    try {
      await openAiClient(pair.agent).chat.completions.create({
        model: 'gpt-4o-mini',
        max_tokens: 5,
        messages: [{ role: 'user', content: 'denied' }],
      });
    } catch (caught) {
      error = caught;
    }
    expect((error as APIError).code).toBe('SVC-POL-2001');
  });
});

describe('system reports (spec 6.2)', () => {
  it('has the control plane and the proxy publish svc.system.health and svc.system.metrics periodically', async () => {
    const nc = await connect({ servers: pair.natsUrl });
    const seen: Array<{ subject: string; data: Record<string, any> }> = [];
    const sub = nc.subscribe('svc.system.*', {
      callback: (_error, msg) => seen.push({ subject: msg.subject, data: msg.json() }),
    });
    try {
      const report = (subject: string, service: string) =>
        seen.filter((m) => m.subject === subject && m.data.service === service);
      await eventually(
        () => seen,
        () =>
          ['control-plane', 'proxy'].every(
            (service) =>
              report('svc.system.health', service).length >= 2 && report('svc.system.metrics', service).length >= 2,
          ),
        10_000,
      );
      const [cpHealth] = report('svc.system.health', 'control-plane');
      expect(SystemHealthMessageSchema.parse(cpHealth?.data)).toMatchObject({
        status: 'ok',
        services: { database: { status: 'ok' }, cache: { status: 'ok' }, event_bus: { status: 'ok' } },
      });
      const [proxyHealth] = report('svc.system.health', 'proxy');
      expect(SystemHealthMessageSchema.parse(proxyHealth?.data)).toMatchObject({
        status: 'ok',
        services: { ruleset: { status: 'ok' }, event_bus: { status: 'ok' } },
      });
      const cpMetrics = SystemMetricsMessageSchema.parse(report('svc.system.metrics', 'control-plane').at(-1)?.data);
      // The first test's REST calls were counted: one number per metric, a histogram by its count.
      expect(cpMetrics.metrics.svc_http_requests_total).toBeGreaterThan(0);
      expect(cpMetrics.metrics.svc_http_request_duration_seconds).toBe(cpMetrics.metrics.svc_http_requests_total);
      const proxyMetrics = SystemMetricsMessageSchema.parse(report('svc.system.metrics', 'proxy').at(-1)?.data);
      expect(Object.keys(proxyMetrics.metrics).some((name) => name.startsWith('svc_proxy_'))).toBe(true);
      // Periodic: two reports of one process are an interval apart, not a burst.
      const times = report('svc.system.health', 'proxy').map((m) => Date.parse(m.data.occurred_at as string));
      expect(times[1]! - times[0]!).toBeGreaterThanOrEqual(150);
    } finally {
      sub.unsubscribe();
      await nc.close();
    }
  });
});
