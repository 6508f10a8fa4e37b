import { APIError } from 'openai';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PolicyViolationMessage, UsageEventMessage } from '../../core/events/messages.ts';
import { eventually } from '../harness/control-plane.ts';
import { startProxyRig, type ProxyRig } from './harness.ts';
import { openAiClient } from './sdk-options.ts';
import { failure } from '../harness/failure.ts';

let rig: ProxyRig;

beforeAll(async () => {
  rig = await startProxyRig();
  await rig.addPolicy({ name: 'no-deletes', rules: [{ action: 'tool:delete_repo', effect: 'deny' }], priority: 400 });
});
afterAll(async () => {
  await rig.close();
});

/** Usage events of one execution published on `subject`. */
const published = (subject: string, execution: string) =>
  rig.cp.published.filter(
    (m) => m.subject === subject && (m.data as UsageEventMessage).payload.execution_id === execution,
  );

describe('answers a provider stored, read back', () => {
  it('refuses to read back a response whose tool call was refused when it was generated', async () => {
    // The simulator answers a stored response as it would answer the call: with the tool call
    // `x-sim-tool-call` names.
    const client = openAiClient(rig.agent, {
      'X-Svc-Execution-Id': 'exec-stored-denied',
      'x-sim-tool-call': 'delete_repo',
    });
    const streamed = await failure(async () => {
      const stream = await client.responses.create({ model: 'gpt-4o', input: 'delete', stream: true });
      for await (const event of stream)
        if (event.type === 'response.completed') throw new Error('the stream reached its end');
    });
    expect((streamed as Error).message).toContain('SVC-POL-2001');
    // The stream's first event named the response: reading it back is the walk-around.
    const readBack = await failure(() => client.responses.retrieve('resp_sim'));
    expect(readBack).toBeInstanceOf(APIError);
    expect((readBack as APIError).status).toBe(403);
    expect((readBack as APIError).code).toBe('SVC-POL-2001');
    const completion = await failure(() => client.chat.completions.retrieve('chatcmpl_sim'));
    expect((completion as APIError).status).toBe(403);
    // One violation for the stream's call, one for each read back (only this test denies).
    const violations = await eventually(
      () => rig.cp.published.filter((m) => m.subject === 'svc.acme.policies.violation'),
      (list) => list.length === 3,
    );
    expect(violations.map((m) => (m.data as PolicyViolationMessage).denied_action)).toEqual([
      'tool:delete_repo',
      'tool:delete_repo',
      'tool:delete_repo',
    ]);
  });

  it('refuses a stored tool call whose arguments give a key twice, as it refuses one in a live answer', async () => {
    await rig.addPolicy({
      name: 'no-wipes-read-back',
      priority: 410,
      rules: [
        {
          action: 'tool:run_shell',
          effect: 'deny',
          conditions: [{ field: 'tool_args', operator: 'matches', value: 'rm\\s+-rf' }],
        },
      ],
    });
    const client = (args: string) =>
      openAiClient(rig.agent, {
        'X-Svc-Execution-Id': 'exec-stored-twice',
        'x-sim-tool-call': 'run_shell',
        'x-sim-tool-args': args,
      });
    // Judged by the last `cmd`, a tool reading the first would wipe the disk.
    for (const read of [
      (args: string) => client(args).chat.completions.retrieve('chatcmpl_sim'),
      (args: string) => client(args).responses.retrieve('resp_sim'),
    ]) {
      const refused = await failure(() => read('{"cmd":"rm -rf /","cmd":"ls"}'));
      expect(refused).toBeInstanceOf(APIError);
      expect((refused as APIError).code).toBe('SVC-SYS-9002');
      await expect(read('{"cmd":"ls"}')).resolves.toBeDefined();
    }
  });

  it('withholds a stored response replayed as a stream, which cannot be judged whole', async () => {
    const res = await fetch(`${rig.addresses.proxyUrl}/openai/v1/responses/resp_sim?stream=true`, {
      headers: { 'x-sim-tool-call': 'delete_repo', authorization: 'Bearer sk-test-key' },
    });
    const body = await res.text();
    expect(res.status).toBe(502);
    expect(body).toContain('SVC-ADP-5001');
    expect(body).not.toContain('"delete_repo"');
  });

  it('withholds a stored answer the connection drops mid-way, which cannot be judged whole', async () => {
    const res = await fetch(`${rig.addresses.proxyUrl}/openai/v1/responses/resp_sim`, {
      headers: { 'x-sim-reset-after-bytes': '40', authorization: 'Bearer sk-test-key' },
    });
    expect(res.status).toBe(502);
    expect(await res.text()).toContain('SVC-ADP-5001');
  });

  it('judges a read that carries a body as any other, and sends no body upstream', async () => {
    const res = await request(`${rig.addresses.proxyUrl}/openai/v1/responses/resp_sim`, {
      method: 'GET',
      body: '{"padding":"x"}',
      headers: { 'content-type': 'application/json', 'x-sim-tool-call': 'delete_repo' },
    });
    expect(res.statusCode).toBe(403);
    expect(await res.body.text()).toContain('SVC-POL-2001');
    expect(rig.sim.requests.at(-1)).toMatchObject({ method: 'GET', body: '' });
    expect(rig.sim.requests.at(-1)?.headers['accept-encoding']).toBe('identity');
  });

  it("refuses to read back an Anthropic batch's results holding a denied tool call, and relays them otherwise", async () => {
    const results = (tool: string) =>
      fetch(`${rig.addresses.proxyUrl}/anthropic/v1/messages/batches/msgbatch_sim/results`, {
        headers: { 'x-sim-tool-call': tool, 'x-api-key': 'sk-ant-test', 'X-Svc-Execution-Id': 'exec-batch' },
      });
    const denied = await results('delete_repo');
    expect(denied.status).toBe(403);
    const refusal = await denied.text();
    expect(refusal).toContain('SVC-POL-2001');
    expect(refusal).not.toContain('"delete_repo"');
    const allowed = await results('search');
    expect(allowed.status).toBe(200);
    const lines = (await allowed.text()).trim().split('\n');
    expect(JSON.parse(lines[0] ?? '')).toMatchObject({
      result: { type: 'succeeded', message: { content: [{ type: 'tool_use', name: 'search' }] } },
    });
  });

  it('relays a stored answer whose tool calls are allowed, charging nothing', async () => {
    const client = openAiClient(rig.agent, { 'X-Svc-Execution-Id': 'exec-stored-ok', 'x-sim-tool-call': 'search' });
    const response = await client.responses.retrieve('resp_sim');
    expect(response.output[0]).toMatchObject({ type: 'function_call', name: 'search' });
    const completion = await client.chat.completions.retrieve('chatcmpl_sim');
    expect(completion.choices[0]?.message.tool_calls?.[0]).toMatchObject({ function: { name: 'search' } });
    // Reading back generates nothing: once a call made after the reads is recorded, it is the
    // only one, and no tool call was recorded with it (events leave in order).
    await openAiClient(rig.agent, { 'X-Svc-Execution-Id': 'exec-stored-ok' }).responses.create({
      model: 'gpt-4o',
      input: 'hi',
      max_output_tokens: 4,
    });
    await eventually(
      () => published('svc.acme.events.llm.call', 'exec-stored-ok'),
      (list) => list.length > 0,
    );
    expect(published('svc.acme.events.llm.call', 'exec-stored-ok')).toHaveLength(1);
    expect(published('svc.acme.events.tool.call', 'exec-stored-ok')).toEqual([]);
  });
});
