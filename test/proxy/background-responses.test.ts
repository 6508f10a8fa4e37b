import { APIError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProxyRig, type ProxyRig } from './harness.ts';
import { openAiClient } from './sdk-options.ts';

let rig: ProxyRig;

beforeAll(async () => {
  rig = await startProxyRig();
});
afterAll(async () => {
  await rig.close();
});

describe('a Responses request in the background', () => {
  it('is refused with 403 SVC-ADP-5003 naming the field, and never reaches the provider', async () => {
    const client = openAiClient(rig.agent, { 'X-Svc-Execution-Id': 'exec-background' });
    const before = rig.sim.requests.length;
    let error: unknown;
    try {
      await client.responses.create({ model: 'gpt-4o', input: 'write a long report', background: true });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(APIError);
    expect((error as APIError).status).toBe(403);
    expect((error as APIError).code).toBe('SVC-ADP-5003');
    expect((error as APIError).message).toContain('background');
    expect(rig.sim.requests.length).toBe(before);
    // In the foreground the same request is served.
    const answer = await client.responses.create({
      model: 'gpt-4o',
      input: 'write a long report',
      background: false,
      max_output_tokens: 4,
    });
    expect(answer.status).toBe('completed');
  });
});
