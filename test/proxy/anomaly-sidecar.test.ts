import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { APIError } from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { ensureSidecarIdentity } from '../../control-plane/bootstrap/sidecar-identity.ts';
import { eventually } from '../harness/control-plane.ts';
import { startProxyRig, TENANT, type ProxyRig } from './harness.ts';
import { startToolServer } from './mcp-server.ts';
import { openAiClient } from './sdk-options.ts';
import { settledWithin } from './settled-within.ts';

/**
 * The Immune System over the whole sidecar, end to end: the official OpenAI SDK through the proxy
 * to the provider simulator, with the control plane recording the anomaly and carrying the
 * resumption back. The agent sends calls under execution ids of its own choosing; one that takes
 * a new id for every call starts a new baseline each time, which only the sidecar's sees.
 */
const INTERVAL_MS = 1000;
let rig: ProxyRig | undefined;
let rotated = 0;
/** The bound on held calls where a test reaches it. */
const HELD = 3;

afterEach(async () => {
  await rig?.close();
  rig = undefined;
});

function call(execution: string) {
  return openAiClient(rig!.agent, { 'x-svc-execution-id': execution })
    .chat.completions.create(
      { model: 'gpt-4o-mini', max_tokens: 5, messages: [{ role: 'user', content: execution }] },
      { maxRetries: 0 },
    )
    .withResponse();
}

/** A call under an execution id never used before. */
const rotating = () => call(`rotated-${++rotated}`);

/** Waits for the start of the next interval (the proxy counts on this process's clock). */
async function nextInterval(): Promise<void> {
  await new Promise((r) => setTimeout(r, INTERVAL_MS - (Date.now() % INTERVAL_MS) + 20));
}

async function anomalyEvents(): Promise<{ envelope_id: string; payload: Record<string, unknown> }[]> {
  const listed = await rig!.admin('GET', '/v1/events?event_type=immune.anomaly');
  return listed.status === 200
    ? (listed.body as unknown as { envelope_id: string; payload: Record<string, unknown> }[])
    : [];
}

async function paused(envelopeId: string): Promise<void> {
  await eventually(
    () => rig!.envelope(envelopeId),
    (envelope) => envelope?.state === 'PAUSED',
    10_000,
    100,
  );
}

/** A request on a path no route of OpenAI's matches: metered by estimate. */
function unclassified(execution: string) {
  return fetch(`${rig!.addresses.proxyUrl}/openai/v1/images/generations`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer sk', 'x-svc-execution-id': execution },
    body: JSON.stringify({ prompt: 'a lighthouse' }),
  });
}

async function heldNow(): Promise<number> {
  const metric = await rig!.proxy.registry.getSingleMetric('svc_proxy_pause_held')!.get();
  return metric.values[0]?.value ?? 0;
}

describe('anomalies of the whole sidecar', () => {
  it('flags nothing in normal traffic of several executions, then holds an agent rotating its execution ids, new ids included, until resumed', async () => {
    rig = await startProxyRig({
      proxy_anomaly_action: 'pause',
      proxy_anomaly_interval_seconds: 1,
      proxy_anomaly_z: 3,
      proxy_anomaly_min_calls: 4,
      proxy_anomaly_hold_timeout_seconds: 30,
    });
    // Normal traffic: a few executions, one call each per interval, one joining half way.
    for (let i = 0; i < 7; i++) {
      await nextInterval();
      await Promise.all(['a', 'b', 'c', ...(i >= 3 ? ['d'] : [])].map((execution) => call(execution)));
    }
    await nextInterval();
    expect(await anomalyEvents()).toEqual([]);

    // A burst in one interval, every call under a new execution id.
    const burst = Array.from({ length: 16 }, () => rotating());
    for (const c of burst) c.catch(() => undefined);
    const [event] = await eventually(anomalyEvents, (events) => events.length > 0, 10_000, 100);
    expect(event!.payload).toMatchObject({ kind: 'call_rate', scope: 'sidecar', action: 'pause', ceiling: null });
    const anchor = event!.envelope_id;
    await eventually(
      () => rig!.envelope(anchor),
      (envelope) => envelope?.state === 'PAUSED',
      10_000,
      100,
    );

    // Yet another new id, and an execution of the normal traffic: held, nothing sent upstream.
    const upstreamBefore = rig.sim.requests.length;
    const next = rotating();
    const known = call('a');
    expect(await settledWithin(Promise.race([next, known]), 500)).toBe(false);
    expect(rig.sim.requests.length).toBe(upstreamBefore);

    // Resuming the envelope the event names resumes the sidecar.
    const resuming = Date.now();
    const resumed = await rig.admin('POST', `/v1/envelopes/${anchor}/status`, { status: 'RUNNING' });
    expect(resumed.status).toBe(200);
    const [{ data }] = await Promise.all([next, known]);
    expect(Date.now() - resuming).toBeLessThan(2000);
    expect(data.usage?.completion_tokens).toBe(5);
    expect(await Promise.all(burst)).toHaveLength(16);
  }, 60_000);

  it('ends the sidecar when a slow ramp over several executions reaches the ceiling, and refuses new execution ids after', async () => {
    rig = await startProxyRig({
      proxy_anomaly_action: 'terminate',
      proxy_anomaly_interval_seconds: 1,
      proxy_anomaly_max_calls: 8,
    });
    // One more call each interval, spread over three executions: under the z-score's floor
    // (proxy_anomaly_min_calls, 20), so only the ceiling can see it.
    for (let n = 3; n <= 8; n++) {
      await nextInterval();
      await Promise.allSettled(Array.from({ length: n }, (_, i) => call(['x', 'y', 'z'][i % 3]!)));
    }
    const [event] = await eventually(anomalyEvents, (events) => events.length > 0, 10_000, 100);
    expect(event!.payload).toMatchObject({
      kind: 'call_rate',
      scope: 'sidecar',
      action: 'terminate',
      count: 8,
      ceiling: 8,
    });

    for (const execution of ['x', `rotated-${++rotated}`]) {
      const refused = await call(execution).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(refused).toBeInstanceOf(APIError);
      expect((refused as APIError).status).toBe(409);
      expect((refused as APIError).code).toBe('SVC-ENV-1003');
    }
    await eventually(
      () => rig!.envelope(event!.envelope_id),
      (envelope) => envelope?.state === 'TERMINATED',
      10_000,
      100,
    );
  }, 60_000);

  it('moves the pause to a held envelope when the agent ends the one it rode on, and only resuming that one releases the sidecar', async () => {
    rig = await startProxyRig({
      proxy_anomaly_action: 'pause',
      proxy_anomaly_max_calls: 3,
      proxy_anomaly_hold_timeout_seconds: 30,
    });
    const burst = [rotating(), rotating(), rotating()];
    for (const c of burst) c.catch(() => undefined);
    const [event] = await eventually(anomalyEvents, (events) => events.length > 0, 10_000, 100);
    const anchor = event!.envelope_id;
    await paused(anchor);
    const waiting = call('waiting');
    waiting.catch(() => undefined);
    expect(await settledWithin(waiting, 300)).toBe(false);

    // The agent ends the envelope the pause rides on with its own key, as a way out of the pause.
    const { identity } = await ensureSidecarIdentity(rig.cp.plane, { dataDir: rig.cp.dataDir, tenantId: TENANT });
    const asAgent = (path: string, body: unknown) => rig!.cp.call('POST', path, { key: identity.api_key, body });
    expect((await asAgent(`/v1/envelopes/${anchor}/terminate`, { reason: 'done' })).status).toBe(200);
    const events = await eventually(
      anomalyEvents,
      (listed) => listed.some((e) => e.payload.moved_from === anchor),
      10_000,
      100,
    );
    const moved = events.find((e) => e.payload.moved_from === anchor)!;
    expect(moved.payload).toMatchObject({ kind: 'call_rate', scope: 'sidecar', action: 'pause' });
    const next = moved.envelope_id;
    expect((await rig.envelope(next))?.execution_id).toBe('waiting');
    await paused(next);

    // Still paused: the waiting call and one under a new id are held, nothing sent upstream.
    const upstreamBefore = rig.sim.requests.length;
    const fresh = rotating();
    fresh.catch(() => undefined);
    expect(await settledWithin(Promise.race([waiting, fresh]), 500)).toBe(false);
    expect(rig.sim.requests.length).toBe(upstreamBefore);
    // The agent's key cannot lift the Immune System's pause on the new anchor either.
    expect((await asAgent(`/v1/envelopes/${next}/status`, { status: 'RUNNING' })).status).toBe(403);

    const resumed = await rig.admin('POST', `/v1/envelopes/${next}/status`, { status: 'RUNNING' });
    expect(resumed.status).toBe(200);
    const served = await Promise.all([waiting, fresh]);
    expect(served.map(({ data }) => data.usage?.completion_tokens)).toEqual([5, 5]);
  }, 60_000);

  it('counts no call a pause held, an MCP tools/call as a model call, once released', async () => {
    const tools = await startToolServer(true);
    rig = await startProxyRig({
      proxy_mcp_servers: `tools=${tools.url}`,
      proxy_anomaly_action: 'pause',
      proxy_anomaly_interval_seconds: 3600,
      proxy_anomaly_max_calls: 3,
      proxy_anomaly_hold_timeout_seconds: 30,
    });
    const client = new Client({ name: 'agent', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${rig.addresses.proxyUrl}/mcp/tools/mcp`), {
        requestInit: { headers: { 'X-Svc-Execution-Id': 'held-mcp' } },
      }),
    );
    try {
      // One call counted of the three that reach the sidecar's ceiling.
      await client.callTool({ name: 'search', arguments: {} });
      const envelopeId = rig.proxy.envelopes.resolve({ 'x-svc-execution-id': 'held-mcp' }).envelope.envelopeId;
      await eventually(
        () => rig!.envelope(envelopeId),
        (envelope) => envelope !== undefined,
        10_000,
        50,
      );
      expect((await rig.admin('POST', `/v1/envelopes/${envelopeId}/status`, { status: 'PAUSED' })).status).toBe(200);
      await eventually(
        () => Promise.resolve(rig!.proxy.envelopes.get(envelopeId)?.paused ?? null),
        (reason) => reason !== null,
        5000,
        50,
      );
      const held = [
        client.callTool({ name: 'search', arguments: {} }),
        client.callTool({ name: 'search', arguments: {} }),
        call('held-mcp'),
      ];
      expect(await settledWithin(Promise.race(held), 300)).toBe(false);
      expect((await rig.admin('POST', `/v1/envelopes/${envelopeId}/status`, { status: 'RUNNING' })).status).toBe(200);
      await Promise.all(held);
      // Released, the held calls went on uncounted: the ceiling was not reached.
      const detections = await rig.proxy.registry.getSingleMetric('svc_immune_anomalies_total')!.get();
      expect(detections.values).toEqual([]);
      expect(rig.proxy.envelopes.get(envelopeId)?.paused).toBeNull();
    } finally {
      await client.close();
      await tools.close();
    }
  }, 60_000);

  it('holds unclassified calls and stored answers read back until resumed, within the bound on held calls', async () => {
    rig = await startProxyRig({
      proxy_anomaly_action: 'pause',
      proxy_anomaly_max_calls: 3,
      proxy_anomaly_max_held: HELD,
      proxy_anomaly_hold_timeout_seconds: 30,
    });
    // Three calls reach the ceiling: the third is held, its envelope the anchor.
    const burst = ['x', 'y', 'z'].map((execution) => call(execution));
    for (const c of burst) c.catch(() => undefined);
    const listed = await eventually(
      () => rig!.admin('GET', '/v1/events?event_type=immune.anomaly'),
      (r) => r.status === 200 && (r.body as unknown as unknown[]).length > 0,
      10_000,
      100,
    );
    const anchor = (listed.body as unknown as { envelope_id: string }[])[0]!.envelope_id;

    const before = rig.sim.requests.length;
    const estimated = unclassified('images');
    const stored = openAiClient(rig.agent, { 'x-svc-execution-id': 'reader' }).responses.retrieve('resp_sim');
    stored.catch(() => undefined);
    expect([await settledWithin(estimated, 500), await settledWithin(stored, 0)]).toEqual([false, false]);
    expect(rig.sim.requests.length).toBe(before);
    await eventually(heldNow, (held) => held === HELD, 5000, 50);

    // The bound on held calls is theirs too: one more is refused at once.
    const over = await unclassified('one-too-many');
    expect(over.status).toBe(429);
    expect(await over.text()).toContain('SVC-SYS-9005');
    expect(rig.sim.requests.length).toBe(before);

    const resumed = await rig.admin('POST', `/v1/envelopes/${anchor}/status`, { status: 'RUNNING' });
    expect(resumed.status).toBe(200);
    expect((await estimated).status).toBe(200);
    expect((await stored).id).toBe('resp_sim');
    await Promise.all(burst);
  }, 60_000);
});
