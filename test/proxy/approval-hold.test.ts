import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadServedDefinition } from '../../control-plane/grpc/contracts.ts';
import { eventually, ROOT_KEY } from '../harness/control-plane.ts';
import { clientsFor, unary } from '../harness/grpc.ts';
import { callOk, mcpClient } from '../mcp/mcp-client.ts';
import { startToolServer, type ToolServer } from './mcp-server.ts';
import { startNatsPair, type NatsPair } from './nats-pair.ts';
import { openAiClient } from './sdk-options.ts';
import { sdkRefusal } from './sdk-refusal.ts';
import { settledWithin } from './settled-within.ts';

/**
 * Calls a REQUIRE_APPROVAL decision holds, end to end: the official OpenAI SDK through the
 * proxy to the provider simulator, the control plane as its own process would run it, and a
 * real nats-server between them.
 */
const TIMEOUT_SECONDS = 5;
const MAX_HELD = 2;
let pair: NatsPair;
let mcp: Client;
let tools: ToolServer;

beforeAll(async () => {
  tools = await startToolServer(true);
  pair = await startNatsPair({
    proxy_approval_timeout_seconds: TIMEOUT_SECONDS,
    proxy_approval_max_held: MAX_HELD,
    proxy_approval_recheck_ms: 300,
    proxy_mcp_servers: `tools=${tools.url}`,
  });
  await pair.addPolicy({
    name: 'big-model-needs-a-human',
    rules: [{ action: 'llm:gpt-4o', effect: 'require_approval', message: 'gpt-4o needs a human' }],
    priority: 600,
  });
  await pair.addPolicy({
    name: 'deletes-need-a-human',
    rules: [{ action: 'tool:delete_repo', effect: 'require_approval', message: 'deletes need a human' }],
    priority: 600,
  });
  mcp = await mcpClient(pair.cpUrl, ROOT_KEY, { headers: { 'x-tenant-id': 'acme' } });
}, 60_000);

afterAll(async () => {
  await mcp.close();
  await pair.close();
  await tools.close();
});

interface PendingApproval {
  approval_id: string;
  action: string;
  envelope_id?: string;
  requested_by?: { type: string; id: string };
  context: Record<string, unknown>;
}

/** Waits until `count` approvals are pending besides those in `known`; polled under the rate limit. */
async function newPending(known: ReadonlySet<string>, count = 1): Promise<PendingApproval[]> {
  const res = await eventually(
    () => pair.rest('GET', '/v1/approvals?status=PENDING'),
    (r) => r.status === 200 && (r.body as PendingApproval[]).filter((a) => !known.has(a.approval_id)).length >= count,
    10_000,
    200,
  );
  return (res.body as PendingApproval[]).filter((a) => !known.has(a.approval_id));
}

async function pendingIds(): Promise<Set<string>> {
  const res = await pair.rest('GET', '/v1/approvals?status=PENDING');
  return new Set((res.body as PendingApproval[]).map((a) => a.approval_id));
}

async function heldNow(): Promise<number> {
  return (await pair.proxy.registry.getSingleMetric('svc_proxy_approval_held')!.get()).values[0]?.value ?? 0;
}

async function holdOutcomes(): Promise<Record<string, number>> {
  const metric = await pair.proxy.registry.getSingleMetric('svc_proxy_approval_holds_total')!.get();
  return Object.fromEntries(metric.values.map((v) => [String(v.labels.outcome), v.value]));
}

/** The envelope a held call's approval names, once the control plane knows it. */
async function envelopeOf(approval: PendingApproval | undefined): Promise<string> {
  const envelopeId = String(approval?.envelope_id);
  await pair.envelopeStored(envelopeId);
  return envelopeId;
}

async function terminate(envelopeId: string): Promise<void> {
  const terminated = await pair.rest('POST', `/v1/envelopes/${envelopeId}/terminate`, { reason: 'operator stop' });
  expect(terminated.status).toBe(200);
}

function held(content: string) {
  return openAiClient(pair.agent)
    .chat.completions.create(
      { model: 'gpt-4o', max_tokens: 5, messages: [{ role: 'user', content }] },
      { maxRetries: 0 },
    )
    .withResponse();
}

describe('an MCP tool call held for approval', () => {
  it('waits, with nothing forwarded to the tool server, and is forwarded once approved', async () => {
    const known = await pendingIds();
    const agent = new Client({ name: 'agent', version: '1.0.0' });
    await agent.connect(
      new StreamableHTTPClientTransport(new URL(`${pair.proxyUrl}/mcp/tools/mcp`), {
        requestInit: { headers: { 'x-svc-execution-id': 'exec-mcp-approval' } },
      }),
    );
    try {
      const call = agent.callTool({ name: 'delete_repo', arguments: { repo: 'demo' } });
      const [approval] = await newPending(known);
      expect(approval).toMatchObject({ action: 'tool:delete_repo', requested_by: { type: 'proxy' } });
      expect(await settledWithin(call, 300)).toBe(false);
      expect(tools.calls).not.toContain('delete_repo');
      expect(await heldNow()).toBe(1);

      await callOk(mcp, 'approve_action', { approval_id: approval!.approval_id, comment: 'fine' });
      const result = await call;
      expect(result.content).toEqual([{ type: 'text', text: 'delete_repo done' }]);
      expect(tools.calls).toContain('delete_repo');
      expect(await heldNow()).toBe(0);
    } finally {
      await agent.close();
    }
  });

  it('is refused with SVC-POL-2004 when the approval is rejected, and never forwarded', async () => {
    const known = await pendingIds();
    const before = tools.calls.length;
    const agent = new Client({ name: 'agent', version: '1.0.0' });
    await agent.connect(
      new StreamableHTTPClientTransport(new URL(`${pair.proxyUrl}/mcp/tools/mcp`), {
        requestInit: { headers: { 'x-svc-execution-id': 'exec-mcp-rejected' } },
      }),
    );
    try {
      const call = agent.callTool({ name: 'delete_repo', arguments: { repo: 'prod' } }).then(
        () => undefined,
        (caught: unknown) => caught,
      );
      const [approval] = await newPending(known);
      const denying = Date.now();
      await callOk(mcp, 'deny_action', { approval_id: approval!.approval_id, reason: 'not in prod' });
      const error = await call;
      expect(Date.now() - denying).toBeLessThan(1000);
      expect(String(error)).toContain('SVC-POL-2004');
      expect(String(error)).toContain('not in prod');
      expect(tools.calls.length).toBe(before);
    } finally {
      await agent.close();
    }
  });
});

describe("a tool call in a model's answer held for approval", () => {
  const toolAnswer = (execution: string) =>
    openAiClient(pair.agent, { 'x-sim-tool-call': 'delete_repo', 'X-Svc-Execution-Id': execution })
      .chat.completions.create(
        { model: 'gpt-4o-mini', max_tokens: 5, messages: [{ role: 'user', content: 'clean up' }] },
        { maxRetries: 0 },
      )
      .withResponse();

  it('holds the answer, paid for, until approved, then relays it with the tool call', async () => {
    const known = await pendingIds();
    const upstreamBefore = pair.sim.requests.length;
    const answer = toolAnswer('exec-answer-approved');
    const [approval] = await newPending(known);
    expect(approval).toMatchObject({ action: 'tool:delete_repo', requested_by: { type: 'proxy' } });
    // The model answered; the agent has not received the answer.
    expect(pair.sim.requests.length).toBe(upstreamBefore + 1);
    expect(await settledWithin(answer, 300)).toBe(false);
    expect(await heldNow()).toBe(1);

    await callOk(mcp, 'approve_action', { approval_id: approval!.approval_id, comment: 'fine' });
    const { data } = await answer;
    expect(data.choices[0]?.message.tool_calls?.[0]).toMatchObject({ function: { name: 'delete_repo' } });
    expect(await heldNow()).toBe(0);
  });

  it('holds a stream at the tool call until approved; the stream then ends with it', async () => {
    const known = await pendingIds();
    const stream = await openAiClient(pair.agent, {
      'x-sim-tool-call': 'delete_repo',
      'X-Svc-Execution-Id': 'exec-stream-approved',
    }).chat.completions.create(
      { model: 'gpt-4o-mini', max_tokens: 5, stream: true, messages: [{ role: 'user', content: 'clean up' }] },
      { maxRetries: 0 },
    );
    const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    const read = (async () => {
      for await (const chunk of stream) chunks.push(chunk);
    })();
    const [approval] = await newPending(known);
    expect(approval).toMatchObject({ action: 'tool:delete_repo' });
    expect(await settledWithin(read, 300)).toBe(false);
    expect(chunks.some((c) => c.choices[0]?.finish_reason === 'tool_calls')).toBe(false);

    await callOk(mcp, 'approve_action', { approval_id: approval!.approval_id, comment: 'fine' });
    await read;
    expect(chunks.some((c) => c.choices[0]?.delta.tool_calls?.[0]?.function?.name === 'delete_repo')).toBe(true);
    expect(chunks.at(-1)?.choices[0]?.finish_reason).toBe('tool_calls');
  });

  it('refuses the held answer with SVC-ENV-1003 when its envelope is terminated meanwhile', async () => {
    const known = await pendingIds();
    const refused = sdkRefusal(toolAnswer('exec-answer-terminated'));
    const [approval] = await newPending(known);
    await terminate(await envelopeOf(approval));
    const error = await refused;
    expect(error.status).toBe(409);
    expect(error.code).toBe('SVC-ENV-1003');
    expect(await heldNow()).toBe(0);
  });

  it('refuses the answer with SVC-POL-2004 once rejected', async () => {
    const known = await pendingIds();
    const refused = sdkRefusal(toolAnswer('exec-answer-rejected'));
    const [approval] = await newPending(known);
    await callOk(mcp, 'deny_action', { approval_id: approval!.approval_id, reason: 'not this repo' });
    const error = await refused;
    expect(error.status).toBe(403);
    expect(error.code).toBe('SVC-POL-2004');
    expect(error.message).toContain('not this repo');
  });
});

describe('a call held for approval', () => {
  it('waits, with nothing sent upstream, and is released within 1 s of approve_action over MCP', async () => {
    const known = await pendingIds();
    const upstreamBefore = pair.sim.requests.length;
    const call = held('needs approval');
    const [approval] = await newPending(known);
    expect(approval).toMatchObject({
      action: 'llm:gpt-4o',
      requested_by: { type: 'proxy' },
      context: { model: 'gpt-4o', provider: 'openai', stream: false },
    });
    expect(await settledWithin(call, 300)).toBe(false);
    expect(pair.sim.requests.length).toBe(upstreamBefore);
    expect(await heldNow()).toBe(1);

    const approving = Date.now();
    const approved = await callOk(mcp, 'approve_action', { approval_id: approval!.approval_id, comment: 'fine' });
    expect(approved).toMatchObject({ approval: { status: 'APPROVED', reviewer_id: expect.any(String) } });
    const { data, response } = await call;
    expect(Date.now() - approving).toBeLessThan(1000);
    expect(data.choices[0]?.message.content).toBeTruthy();
    expect(data.usage?.completion_tokens).toBe(5);
    expect(pair.sim.requests.length).toBe(upstreamBefore + 1);
    expect(response.headers.get('x-svc-envelope-id')).toBe(approval!.envelope_id);
    expect(await heldNow()).toBe(0);
  });

  it('holds a streamed call and releases it within 1 s of PATCH /v1/approvals/{id}', async () => {
    const known = await pendingIds();
    const upstreamBefore = pair.sim.requests.length;
    const call = openAiClient(pair.agent).chat.completions.create(
      {
        model: 'gpt-4o',
        max_tokens: 5,
        stream: true,
        stream_options: { include_usage: true },
        messages: [{ role: 'user', content: 'stream after approval' }],
      },
      { maxRetries: 0 },
    );
    const [approval] = await newPending(known);
    expect(approval?.context).toMatchObject({ stream: true });
    expect(await settledWithin(call, 300)).toBe(false);
    expect(pair.sim.requests.length).toBe(upstreamBefore);

    const approving = Date.now();
    const patched = await pair.rest('PATCH', `/v1/approvals/${approval!.approval_id}`, {
      status: 'APPROVED',
      reviewer_id: 'alice',
    });
    expect(patched.status).toBe(200);
    const stream = await call;
    expect(Date.now() - approving).toBeLessThan(1000);
    let text = '';
    let completion = 0;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      completion = chunk.usage?.completion_tokens ?? completion;
    }
    expect(text.length).toBeGreaterThan(0);
    expect(completion).toBe(5);
  });

  it('is released within 1 s of gRPC UpdateApproval', async () => {
    const clients = clientsFor(loadServedDefinition(), `127.0.0.1:${String(pair.plane.grpcPort())}`);
    try {
      const known = await pendingIds();
      const call = held('approved over gRPC');
      const [approval] = await newPending(known);
      const approving = Date.now();
      const decided = await unary(
        clients.client('svc.policy.v1.PolicyService'),
        'UpdateApproval',
        { approval_id: approval!.approval_id, status: 'APPROVAL_STATUS_APPROVED', reviewer_id: 'dave' },
        { key: ROOT_KEY, metadata: { 'x-tenant-id': 'acme' } },
      );
      expect(decided.approval).toMatchObject({ status: 'APPROVAL_STATUS_APPROVED' });
      const { data } = await call;
      expect(Date.now() - approving).toBeLessThan(1000);
      expect(data.usage?.completion_tokens).toBe(5);
    } finally {
      clients.close();
    }
  });

  it('is refused with SVC-POL-2004 and the approval id once rejected (deny_action over MCP)', async () => {
    const known = await pendingIds();
    const upstreamBefore = pair.sim.requests.length;
    const refused = sdkRefusal(held('will be rejected'));
    const [approval] = await newPending(known);
    const denying = Date.now();
    await callOk(mcp, 'deny_action', { approval_id: approval!.approval_id, reason: 'not today' });
    const error = await refused;
    expect(Date.now() - denying).toBeLessThan(1000);
    expect(error.status).toBe(403);
    expect(error.code).toBe('SVC-POL-2004');
    expect(error.message).toContain(`approval ${approval!.approval_id} was rejected`);
    expect(error.message).toContain('not today');
    expect(pair.sim.requests.length).toBe(upstreamBefore);
  });

  it('is refused with SVC-POL-2004 and the approval id when nobody decides in time', async () => {
    const known = await pendingIds();
    const started = Date.now();
    const refused = sdkRefusal(held('nobody looks'));
    const [approval] = await newPending(known);
    const error = await refused;
    expect(Date.now() - started).toBeGreaterThanOrEqual(TIMEOUT_SECONDS * 1000 - 100);
    expect(error.status).toBe(403);
    expect(error.code).toBe('SVC-POL-2004');
    expect(error.message).toContain(`approval ${approval!.approval_id} was not decided within ${TIMEOUT_SECONDS} s`);
    expect((await holdOutcomes()).timed_out).toBe(1);
  }, 15_000);

  it('refuses a call over the bound at once with SVC-SYS-9005, opening no approval for it', async () => {
    const known = await pendingIds();
    const refused = [sdkRefusal(held('first')), sdkRefusal(held('second'))];
    const pending = await newPending(known, MAX_HELD);
    expect(await heldNow()).toBe(MAX_HELD);
    const started = Date.now();
    const error = await sdkRefusal(held('one too many'));
    expect(Date.now() - started).toBeLessThan(1000);
    expect(error.status).toBe(429);
    expect(error.code).toBe('SVC-SYS-9005');
    expect(error.message).toContain('proxy_approval_max_held');
    expect(await newPending(known, MAX_HELD)).toHaveLength(MAX_HELD);
    for (const approval of pending)
      await pair.rest('PATCH', `/v1/approvals/${approval.approval_id}`, { status: 'REJECTED', reviewer_id: 'bob' });
    for (const error of await Promise.all(refused)) expect(error.code).toBe('SVC-POL-2004');
    expect((await holdOutcomes()).full).toBe(1);
  });

  it('is refused with SVC-ENV-1003 at once when its envelope is terminated while it waits', async () => {
    const known = await pendingIds();
    const refused = sdkRefusal(
      openAiClient(pair.agent, { 'X-Svc-Execution-Id': 'exec-held-terminated' }).chat.completions.create(
        { model: 'gpt-4o', max_tokens: 5, messages: [{ role: 'user', content: 'ended meanwhile' }] },
        { maxRetries: 0 },
      ),
    );
    const [approval] = await newPending(known);
    const envelopeId = await envelopeOf(approval);
    const cancelled = (await holdOutcomes()).cancelled ?? 0;
    const terminating = Date.now();
    await terminate(envelopeId);
    const error = await refused;
    expect(Date.now() - terminating).toBeLessThan(1000);
    expect(error.status).toBe(409);
    expect(error.code).toBe('SVC-ENV-1003');
    expect(await heldNow()).toBe(0);
    expect((await holdOutcomes()).cancelled).toBe(cancelled + 1);
  });

  it('survives a control-plane restart: the proxy asks again and opens or finds its approval', async () => {
    const known = await pendingIds();
    const before = held('held before the restart');
    const [opened] = await newPending(known);
    await pair.stopPlane();
    // Asked while no control plane answers: opened only once one is back.
    const during = held('held during the restart');
    await eventually(heldNow, (n) => n === 2, 5000);
    await pair.startPlane();
    const pending = await newPending(known, 2);
    expect(pending.map((a) => a.approval_id)).toContain(opened!.approval_id);
    for (const approval of pending)
      expect(
        (
          await pair.rest('PATCH', `/v1/approvals/${approval.approval_id}`, {
            status: 'APPROVED',
            reviewer_id: 'carol',
          })
        ).status,
      ).toBe(200);
    for (const call of [before, during]) expect((await call).data.usage?.completion_tokens).toBe(5);
    // One approval per call, however often the proxy asked.
    expect(await newPending(known, 0)).toEqual([]);
    const approved = (await pair.rest('GET', '/v1/approvals?status=APPROVED')).body as PendingApproval[];
    expect(approved.filter((a) => pending.some((p) => p.approval_id === a.approval_id))).toHaveLength(2);
  }, 30_000);

  it('is refused with SVC-SYS-9001 and its approval id when the proxy shuts down', async () => {
    const known = await pendingIds();
    const refused = sdkRefusal(held('held at shutdown'));
    const [approval] = await newPending(known);
    await pair.closeProxy();
    const error = await refused;
    expect(error.status).toBe(503);
    expect(error.code).toBe('SVC-SYS-9001');
    expect(error.message).toContain(`approval ${approval!.approval_id}`);
  });
});
