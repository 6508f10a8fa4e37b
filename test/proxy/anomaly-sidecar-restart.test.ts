import { afterEach, describe, expect, it } from 'vitest';
import { eventually } from '../harness/control-plane.ts';
import { startNatsPair, type NatsPair } from './nats-pair.ts';
import { openAiClient } from './sdk-options.ts';
import { sdkRefusal } from './sdk-refusal.ts';
import { settledWithin } from './settled-within.ts';

/**
 * The Immune System's pause or termination of the whole sidecar outlives a restart of the proxy:
 * it is kept in the proxy's store, so an agent cannot shake it off by restarting its sidecar and
 * sending its calls under new execution ids. The official OpenAI SDK goes through the proxy to
 * the provider simulator; the control plane runs over a real nats-server.
 */
const CEILING = 3;
let pair: NatsPair | undefined;
let executions = 0;

afterEach(async () => {
  await pair?.close();
  pair = undefined;
});

function call(execution = `restart-${++executions}`) {
  return openAiClient(pair!.agent, { 'x-svc-execution-id': execution })
    .chat.completions.create(
      { model: 'gpt-4o-mini', max_tokens: 5, messages: [{ role: 'user', content: execution }] },
      { maxRetries: 0 },
    )
    .withResponse();
}

type AnomalyEvent = { envelope_id: string; payload: Record<string, unknown> };

async function anomalyEvents(): Promise<AnomalyEvent[]> {
  const listed = await pair!.rest('GET', '/v1/events?event_type=immune.anomaly');
  return listed.status === 200 ? (listed.body as AnomalyEvent[]) : [];
}

/** Calls under new execution ids up to the sidecar's ceiling; the anomaly event once recorded. */
async function tripSidecar(): Promise<AnomalyEvent> {
  for (let i = 0; i < CEILING; i++) call().catch(() => undefined);
  const [event] = await eventually(anomalyEvents, (events) => events.length > 0, 10_000, 100);
  expect(event!.payload).toMatchObject({ scope: 'sidecar', ceiling: CEILING });
  return event!;
}

async function recordedAs(envelopeId: string, state: string): Promise<void> {
  await eventually(
    () => pair!.rest('GET', `/v1/envelopes/${envelopeId}`),
    (r) => r.body.state === state,
    10_000,
    100,
  );
}

/** `svc_proxy_sidecar_state` of the proxy now: 0 running, 1 paused, 2 terminated. */
async function sidecarState(): Promise<number | undefined> {
  return (await pair!.proxy.registry.getSingleMetric('svc_proxy_sidecar_state')!.get()).values[0]?.value;
}

/** A sidecar paused by its ceiling, the anchor recorded PAUSED, then restarted; the anchor. */
async function pausedThenRestarted(): Promise<{ running: NatsPair; anchor: string }> {
  const running = await startNatsPair({
    proxy_anomaly_action: 'pause',
    proxy_anomaly_max_calls: CEILING,
    proxy_anomaly_hold_timeout_seconds: 30,
  });
  pair = running;
  const { envelope_id: anchor } = await tripSidecar();
  await recordedAs(anchor, 'PAUSED');
  await running.restartProxy();
  return { running, anchor };
}

describe('a sidecar the Immune System paused or terminated, restarted', () => {
  it('is still paused: a new execution id is held until the envelope the event names is resumed', async () => {
    const { running, anchor } = await pausedThenRestarted();
    expect(running.proxy.envelopes.get(anchor)).toBeUndefined();
    expect(await sidecarState()).toBe(1);

    const before = running.sim.requests.length;
    const held = call();
    held.catch(() => undefined);
    expect(await settledWithin(held, 500)).toBe(false);
    expect(running.sim.requests.length).toBe(before);

    const resumed = await running.rest('POST', `/v1/envelopes/${anchor}/status`, { status: 'RUNNING' });
    expect(resumed.status).toBe(200);
    const { data } = await held;
    expect(data.usage?.completion_tokens).toBe(5);
    // Resumed: the next restart starts running.
    await running.restartProxy();
    expect(await sidecarState()).toBe(0);
    expect((await call()).data.usage?.completion_tokens).toBe(5);
  }, 60_000);

  it('is still terminated: a new execution id is refused with 409 SVC-ENV-1003', async () => {
    pair = await startNatsPair({ proxy_anomaly_action: 'terminate', proxy_anomaly_max_calls: CEILING });
    await tripSidecar();
    await pair.restartProxy();
    expect(await sidecarState()).toBe(2);
    const before = pair.sim.requests.length;
    const refused = await sdkRefusal(call());
    expect(refused.status).toBe(409);
    expect(refused.code).toBe('SVC-ENV-1003');
    expect(refused.message).toContain('this sidecar was terminated');
    expect(pair.sim.requests.length).toBe(before);
  }, 60_000);

  it('moves the pause on when the envelope it rode on ended while the proxy could not hear it', async () => {
    const { running, anchor } = await pausedThenRestarted();
    const held = call('held-after-restart');
    held.catch(() => undefined);
    expect(await settledWithin(held, 300)).toBe(false);

    // Ended while the proxy is cut off from NATS: it learns it from svc_holds once back, never
    // having served the anchor since its restart.
    await running.proxyLink.cut();
    try {
      expect(
        (await running.rest('POST', `/v1/envelopes/${anchor}/terminate`, { reason: 'operator stop' })).status,
      ).toBe(200);
      await new Promise((r) => setTimeout(r, 300));
    } finally {
      await running.proxyLink.restore();
    }
    const events = await eventually(
      anomalyEvents,
      (listed) => listed.some((e) => e.payload.moved_from === anchor),
      15_000,
      100,
    );
    const next = events.find((e) => e.payload.moved_from === anchor)!.envelope_id;
    expect((await running.rest('GET', `/v1/envelopes/${next}`)).body.execution_id).toBe('held-after-restart');
    await recordedAs(next, 'PAUSED');
    expect(await settledWithin(held, 0)).toBe(false);

    expect((await running.rest('POST', `/v1/envelopes/${next}/status`, { status: 'RUNNING' })).status).toBe(200);
    expect((await held).data.usage?.completion_tokens).toBe(5);
    expect(await sidecarState()).toBe(0);
  }, 60_000);
});
