import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { APIError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadServedDefinition } from '../../control-plane/grpc/contracts.ts';
import { eventually, ROOT_KEY } from '../harness/control-plane.ts';
import { clientsFor, unary } from '../harness/grpc.ts';
import { startNatsPair, type NatsPair } from './nats-pair.ts';
import { startToolServer, type ToolServer } from './mcp-server.ts';
import { openAiClient } from './sdk-options.ts';
import { settledWithin } from './settled-within.ts';

/**
 * The Immune System pausing an envelope (`proxy_anomaly_action=pause`), end to end: the official
 * OpenAI SDK through the proxy to the provider simulator, the control plane as its own process
 * would run it, and a real nats-server between them. Each execution's baseline is one call and
 * then quiet seconds; a burst of calls in one second stands far above it.
 */
const INTERVAL_SECONDS = 1;
const WARMUP_INTERVALS = 5;
const HOLD_TIMEOUT_SECONDS = 3;
const BURST = 6;
let pair: NatsPair;
let tools: ToolServer;
const envelopeOf = new Map<string, string>();

function call(execution: string, content: string) {
  return openAiClient(pair.agent, { 'x-svc-execution-id': execution })
    .chat.completions.create(
      { model: 'gpt-4o-mini', max_tokens: 5, messages: [{ role: 'user', content }] },
      { maxRetries: 0 },
    )
    .withResponse();
}

async function pausedHeld(): Promise<number> {
  return (await pair.proxy.registry.getSingleMetric('svc_proxy_pause_held')!.get()).values[0]?.value ?? 0;
}

async function holdOutcomes(): Promise<Record<string, number>> {
  const metric = await pair.proxy.registry.getSingleMetric('svc_proxy_pause_holds_total')!.get();
  return Object.fromEntries(metric.values.map((v) => [String(v.labels.outcome), v.value]));
}

/** Fires a burst of calls of `execution` at once and waits until the control plane shows its envelope PAUSED. */
async function burstUntilPaused(execution: string): Promise<Promise<unknown>[]> {
  // At the start of an interval (the proxy counts on this process's clock), so the burst falls in one.
  const intervalMs = INTERVAL_SECONDS * 1000;
  await new Promise((r) => setTimeout(r, intervalMs - (Date.now() % intervalMs) + 20));
  const calls = Array.from({ length: BURST }, (_, i) => call(execution, `burst ${i}`));
  for (const c of calls) c.catch(() => undefined);
  await eventually(
    () => pair.rest('GET', `/v1/envelopes/${envelopeOf.get(execution)}`),
    (r) => r.status === 200 && r.body.state === 'PAUSED',
    10_000,
    100,
  );
  return calls;
}

beforeAll(async () => {
  tools = await startToolServer(true);
  pair = await startNatsPair({
    proxy_mcp_servers: `tools=${tools.url}`,
    proxy_anomaly_action: 'pause',
    proxy_anomaly_interval_seconds: INTERVAL_SECONDS,
    proxy_anomaly_z: 3,
    proxy_anomaly_min_calls: 4,
    proxy_anomaly_hold_timeout_seconds: HOLD_TIMEOUT_SECONDS,
  });
  // One call per execution, then quiet intervals: the baselines the bursts stand out from.
  for (const execution of ['resumed', 'resumed-grpc', 'timed-out', 'operator']) {
    const { response } = await call(execution, 'baseline');
    envelopeOf.set(execution, response.headers.get('x-svc-envelope-id')!);
  }
  await new Promise((r) => setTimeout(r, (WARMUP_INTERVALS + 1.2) * INTERVAL_SECONDS * 1000));
}, 60_000);

afterAll(async () => {
  await pair.close();
  await tools.close();
});

describe('an envelope the Immune System paused', () => {
  it('holds its calls, with nothing sent upstream, until resumed over REST, then releases them within 1 s', async () => {
    const envelopeId = envelopeOf.get('resumed')!;
    const burst = await burstUntilPaused('resumed');
    const paused = await pair.rest('GET', `/v1/envelopes/${envelopeId}`);
    expect(paused.body.status_reason).toContain('immune system');
    const events = await eventually(
      () => pair.rest('GET', `/v1/events?envelope_id=${envelopeId}&event_type=immune.anomaly`),
      (r) => r.status === 200 && (r.body as unknown[]).length > 0,
      5000,
      100,
    );
    expect(events.body[0]).toMatchObject({ payload: { kind: 'call_rate', action: 'pause' } });

    const upstreamBefore = pair.sim.requests.length;
    const next = call('resumed', 'after the pause');
    expect(await settledWithin(next, 300)).toBe(false);
    expect(pair.sim.requests.length).toBe(upstreamBefore);
    const heldBefore = await pausedHeld();
    expect(heldBefore).toBeGreaterThanOrEqual(2);

    const resuming = Date.now();
    const resumed = await pair.rest('POST', `/v1/envelopes/${envelopeId}/status`, { status: 'RUNNING' });
    expect(resumed.status).toBe(200);
    expect(resumed.body.state).toBe('RUNNING');
    const { data, response } = await next;
    expect(Date.now() - resuming).toBeLessThan(1000);
    expect(data.usage?.completion_tokens).toBe(5);
    expect(response.headers.get('x-svc-envelope-id')).toBe(envelopeId);
    // Every call of the burst went on: the ones before the anomaly at once, the held ones on resumption.
    const answered = await Promise.all(burst);
    expect(answered).toHaveLength(BURST);
    expect(pair.sim.requests.length).toBe(upstreamBefore + heldBefore);
    expect(await pausedHeld()).toBe(0);
    expect((await holdOutcomes()).resumed).toBe(heldBefore);
  });

  it('releases its held calls within 1 s of gRPC UpdateEnvelopeStatus RUNNING', async () => {
    const envelopeId = envelopeOf.get('resumed-grpc')!;
    const burst = await burstUntilPaused('resumed-grpc');
    const next = call('resumed-grpc', 'after the pause');
    expect(await settledWithin(next, 300)).toBe(false);
    const clients = clientsFor(loadServedDefinition(), `127.0.0.1:${String(pair.plane.grpcPort())}`);
    try {
      const resuming = Date.now();
      const updated = await unary(
        clients.client('svc.envelope.v1.EnvelopeService'),
        'UpdateEnvelopeStatus',
        { envelope_id: envelopeId, status: 'ENVELOPE_STATUS_RUNNING' },
        { key: ROOT_KEY, metadata: { 'x-tenant-id': 'acme' } },
      );
      expect(updated.envelope).toMatchObject({ status: 'ENVELOPE_STATUS_RUNNING' });
      const { data } = await next;
      expect(Date.now() - resuming).toBeLessThan(1000);
      expect(data.usage?.completion_tokens).toBe(5);
      expect(await Promise.all(burst)).toHaveLength(BURST);
    } finally {
      clients.close();
    }
  });

  it('is held at the proxy too when paused through UpdateEnvelopeStatus, signalled by the control plane', async () => {
    const envelopeId = envelopeOf.get('operator')!;
    await eventually(
      () => pair.rest('GET', `/v1/envelopes/${envelopeId}`),
      (r) => r.status === 200 && r.body.state === 'RUNNING',
      5000,
      100,
    );
    const paused = await pair.rest('POST', `/v1/envelopes/${envelopeId}/status`, {
      status: 'PAUSED',
      reason: 'operator looks first',
    });
    expect(paused.body.state).toBe('PAUSED');
    await eventually(
      () => Promise.resolve(pair.proxy.envelopes.get(envelopeId)?.paused),
      (reason) => reason === 'operator looks first',
      5000,
      50,
    );
    const upstreamBefore = pair.sim.requests.length;
    const next = call('operator', 'while paused by hand');
    expect(await settledWithin(next, 300)).toBe(false);
    expect(pair.sim.requests.length).toBe(upstreamBefore);
    const resuming = Date.now();
    expect((await pair.rest('POST', `/v1/envelopes/${envelopeId}/status`, { status: 'RUNNING' })).status).toBe(200);
    const { data } = await next;
    expect(Date.now() - resuming).toBeLessThan(1000);
    expect(data.usage?.completion_tokens).toBe(5);
  });

  it('holds an MCP tools/call of a paused envelope, forwarding nothing, until it is resumed', async () => {
    const client = new Client({ name: 'agent', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(`${pair.proxyUrl}/mcp/tools/mcp`), {
      requestInit: { headers: { 'X-Svc-Execution-Id': 'mcp-paused' } },
    });
    await client.connect(transport);
    try {
      expect((await client.callTool({ name: 'search', arguments: {} })).content).toEqual([
        { type: 'text', text: 'search done' },
      ]);
      const envelopeId = pair.proxy.envelopes.resolve({ 'x-svc-execution-id': 'mcp-paused' }).envelope.envelopeId;
      await pair.envelopeStored(envelopeId);
      const paused = await pair.rest('POST', `/v1/envelopes/${envelopeId}/status`, { status: 'PAUSED' });
      expect(paused.body.state).toBe('PAUSED');
      await eventually(
        () => Promise.resolve(pair.proxy.envelopes.get(envelopeId)?.paused ?? null),
        (reason) => reason !== null,
        5000,
        50,
      );
      const forwarded = tools.calls.length;
      const held = client.callTool({ name: 'search', arguments: {} });
      expect(await settledWithin(held, 300)).toBe(false);
      expect(tools.calls.length).toBe(forwarded);
      const resuming = Date.now();
      expect((await pair.rest('POST', `/v1/envelopes/${envelopeId}/status`, { status: 'RUNNING' })).status).toBe(200);
      expect((await held).content).toEqual([{ type: 'text', text: 'search done' }]);
      expect(Date.now() - resuming).toBeLessThan(1000);
      expect(tools.calls.length).toBe(forwarded + 1);
    } finally {
      await client.close();
    }
  });

  it('refuses a held call once the hold timeout passes, with SVC-SYS-9001 naming the setting', async () => {
    const envelopeId = envelopeOf.get('timed-out')!;
    const burst = await burstUntilPaused('timed-out');
    const upstreamBefore = pair.sim.requests.length;
    const started = Date.now();
    const error = await call('timed-out', 'never resumed').then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(APIError);
    const refused = error as APIError;
    expect(Date.now() - started).toBeGreaterThanOrEqual(HOLD_TIMEOUT_SECONDS * 1000 - 100);
    expect(refused.status).toBe(503);
    expect(refused.code).toBe('SVC-SYS-9001');
    expect(refused.message).toContain(`envelope ${envelopeId} is paused`);
    expect(refused.message).toContain('proxy_anomaly_hold_timeout_seconds');
    expect(pair.sim.requests.length).toBe(upstreamBefore);
    await Promise.allSettled(burst);
    expect((await holdOutcomes()).timed_out).toBeGreaterThanOrEqual(1);
    const envelope = await pair.rest('GET', `/v1/envelopes/${envelopeId}`);
    expect(envelope.body.state).toBe('PAUSED');
  });
});
