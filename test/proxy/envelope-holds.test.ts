import { APIError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../harness/control-plane.ts';
import { startNatsPair, type NatsPair } from './nats-pair.ts';
import { openAiClient } from './sdk-options.ts';
import { settledWithin } from './settled-within.ts';

/**
 * A paused or ended envelope stays held or refused at a proxy that did not hear the signal: one
 * that restarted, one cut off from NATS when it went out, one that forgot the envelope. The
 * proxy learns it from the `svc_holds` bucket. The official OpenAI SDK goes through the proxy to
 * the provider simulator; the control plane runs as its own process would, over a real
 * nats-server; the proxy's connection to NATS runs through a relay the test can cut.
 */
const CACHE_ENTRIES = 3;
let pair: NatsPair;

function call(headers: Record<string, string>, content = 'hello') {
  return openAiClient(pair.agent, headers)
    .chat.completions.create(
      { model: 'gpt-4o-mini', max_tokens: 5, messages: [{ role: 'user', content }] },
      { maxRetries: 0 },
    )
    .withResponse();
}

/** A first call of `execution`, and its envelope once the control plane stored it. */
async function openEnvelope(execution: string): Promise<string> {
  const { response } = await call({ 'x-svc-execution-id': execution });
  const envelopeId = response.headers.get('x-svc-envelope-id')!;
  await pair.envelopeStored(envelopeId);
  return envelopeId;
}

async function setStatus(envelopeId: string, status: 'PAUSED' | 'RUNNING', reason?: string): Promise<void> {
  const res = await pair.rest('POST', `/v1/envelopes/${envelopeId}/status`, { status, ...(reason ? { reason } : {}) });
  expect(res.body.state).toBe(status);
}

async function terminate(envelopeId: string): Promise<void> {
  const res = await pair.rest('POST', `/v1/envelopes/${envelopeId}/terminate`, { reason: 'operator stop' });
  expect(res.status).toBe(200);
}

/** Terminates the envelope at the control plane and waits until the proxy holds it ended. */
async function terminatedHere(envelopeId: string): Promise<void> {
  await terminate(envelopeId);
  await eventually(
    () => Promise.resolve(pair.proxy.envelopes.get(envelopeId)?.ending?.status),
    (status) => status === 'TERMINATED',
    5000,
    50,
  );
}

/** Calls of other executions until the proxy's envelope cache forgot `envelopeId`. */
async function evict(envelopeId: string, prefix: string): Promise<void> {
  for (let i = 0; i <= CACHE_ENTRIES && pair.proxy.envelopes.get(envelopeId) !== undefined; i++)
    await call({ 'x-svc-execution-id': `${prefix}-filler-${i}` });
  expect(pair.proxy.envelopes.get(envelopeId)).toBeUndefined();
}

/** The call is held: not answered within a while, and nothing reached the provider. */
async function expectHeld(pending: Promise<unknown>): Promise<void> {
  pending.catch(() => undefined);
  const before = pair.sim.requests.length;
  expect(await settledWithin(pending, 500)).toBe(false);
  expect(pair.sim.requests.length).toBe(before);
}

/** The call is refused as one of an ended envelope, and nothing reached the provider. */
async function expectEnded(headers: Record<string, string>, envelopeId: string): Promise<void> {
  const before = pair.sim.requests.length;
  const error = await call(headers).then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(APIError);
  expect((error as APIError).code).toBe('SVC-ENV-1003');
  expect((error as APIError).message).toContain(`envelope ${envelopeId} already ended (TERMINATED)`);
  expect(pair.sim.requests.length).toBe(before);
}

/** The call is answered by the provider (forwarded once). */
async function expectServed(pending: ReturnType<typeof call>, envelopeId: string): Promise<void> {
  const before = pair.sim.requests.length;
  const { data, response } = await pending;
  expect(data.usage?.completion_tokens).toBe(5);
  expect(response.headers.get('x-svc-envelope-id')).toBe(envelopeId);
  expect(pair.sim.requests.length).toBeGreaterThanOrEqual(before);
}

beforeAll(async () => {
  pair = await startNatsPair({ proxy_envelope_cache_entries: CACHE_ENTRIES, proxy_anomaly_hold_timeout_seconds: 30 });
}, 60_000);

afterAll(async () => pair.close());

describe('a proxy that restarted', () => {
  it('holds the calls of an envelope paused before it started, by envelope and by execution id, until resumed', async () => {
    const envelopeId = await openEnvelope('restart-paused');
    await setStatus(envelopeId, 'PAUSED', 'operator looks first');
    await pair.restartProxy();
    expect(pair.proxy.envelopes.get(envelopeId)).toBeUndefined();

    const byEnvelope = call({ 'x-svc-envelope-id': envelopeId });
    await expectHeld(byEnvelope);
    const byExecution = call({ 'x-svc-execution-id': 'restart-paused' });
    await expectHeld(byExecution);
    expect(pair.proxy.envelopes.get(envelopeId)?.paused).toBe('operator looks first');

    const forwarded = pair.sim.requests.length;
    await setStatus(envelopeId, 'RUNNING');
    await expectServed(byEnvelope, envelopeId);
    await expectServed(byExecution, envelopeId);
    expect(pair.sim.requests.length).toBe(forwarded + 2);
  });

  it('refuses the calls of an envelope terminated before it started, with SVC-ENV-1003', async () => {
    const envelopeId = await openEnvelope('restart-terminated');
    await terminate(envelopeId);
    await pair.restartProxy();
    await expectEnded({ 'x-svc-envelope-id': envelopeId }, envelopeId);
    await expectEnded({ 'x-svc-execution-id': 'restart-terminated' }, envelopeId);
  });

  it('still refuses after a restart with NATS away, from what it kept on disk', async () => {
    const envelopeId = await openEnvelope('restart-offline');
    await terminatedHere(envelopeId);
    await pair.proxyLink.cut();
    try {
      await pair.restartProxy();
      await expectEnded({ 'x-svc-envelope-id': envelopeId }, envelopeId);
    } finally {
      await pair.proxyLink.restore();
    }
  });
});

describe('a proxy cut off from NATS when the envelope was paused or ended', () => {
  it('holds and refuses once it reconnects, though the signals were lost', async () => {
    const paused = await openEnvelope('outage-paused');
    const ended = await openEnvelope('outage-ended');
    await pair.proxyLink.cut();
    try {
      await setStatus(paused, 'PAUSED', 'paused while away');
      await terminate(ended);
      // The signals went out while the proxy could not hear them.
      await new Promise((r) => setTimeout(r, 300));
      expect(pair.proxy.envelopes.get(paused)?.paused ?? null).toBeNull();
    } finally {
      await pair.proxyLink.restore();
    }
    await eventually(
      () =>
        Promise.resolve([pair.proxy.holds.forEnvelope(paused)?.status, pair.proxy.holds.forEnvelope(ended)?.status]),
      (states) => states[0] === 'PAUSED' && states[1] === 'TERMINATED',
      10_000,
      100,
    );
    const held = call({ 'x-svc-execution-id': 'outage-paused' });
    await expectHeld(held);
    await expectEnded({ 'x-svc-execution-id': 'outage-ended' }, ended);

    await setStatus(paused, 'RUNNING');
    await expectServed(held, paused);
  });
});

describe('an envelope the proxy forgot (its envelope cache is full)', () => {
  it('is refused when met again after it ended', async () => {
    const envelopeId = await openEnvelope('evicted-ended');
    await terminatedHere(envelopeId);
    await evict(envelopeId, 'evicted-ended');
    await expectEnded({ 'x-svc-execution-id': 'evicted-ended' }, envelopeId);
    await evict(envelopeId, 'evicted-ended-again');
    await expectEnded({ 'x-svc-envelope-id': envelopeId }, envelopeId);
  });

  it('is held when met again after it was paused while forgotten, and released on resumption', async () => {
    const envelopeId = await openEnvelope('evicted-paused');
    await evict(envelopeId, 'evicted-paused');
    await setStatus(envelopeId, 'PAUSED', 'paused while forgotten');
    await eventually(
      () => pair.rest('GET', `/v1/envelopes/${envelopeId}`),
      (r) => r.body.state === 'PAUSED',
      5000,
      50,
    );
    // The pause signal found no envelope here: only the bucket tells the proxy.
    await new Promise((r) => setTimeout(r, 300));
    const held = call({ 'x-svc-execution-id': 'evicted-paused' });
    await expectHeld(held);
    const forwarded = pair.sim.requests.length;
    await setStatus(envelopeId, 'RUNNING');
    await expectServed(held, envelopeId);
    expect(pair.sim.requests.length).toBe(forwarded + 1);
    // Running again: its next call goes through at once.
    await expectServed(call({ 'x-svc-execution-id': 'evicted-paused' }), envelopeId);
  });
});
