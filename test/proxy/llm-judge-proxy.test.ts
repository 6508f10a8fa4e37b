import { APIError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type Simulator } from '../simulator/index.ts';
import { startProxyRig, type ProxyRig } from './harness.ts';
import { openAiClient } from './sdk-options.ts';
import { failure } from '../harness/failure.ts';

/**
 * A tenant that chose the LLM judge: the proxy asks it (here a second simulator answering as a
 * judge) for the SEMANTIC conditions of model and tool calls, with its cache and fail mode.
 */
let judge: Simulator;
let rig: ProxyRig;

beforeAll(async () => {
  judge = await startSimulator();
  rig = await startProxyRig({
    semantic_judge_mode: 'llm',
    semantic_judge_llm_url: `${judge.url}/v1`,
    semantic_judge_llm_timeout_ms: 1000,
  });
  await rig.addPolicy({
    name: 'no-destructive-tools',
    priority: 500,
    rules: [
      {
        action: 'tool:*',
        effect: 'deny',
        conditions: [{ field: 'tool_args', operator: 'semantic', value: 'DESTRUCTIVE' }],
      },
    ],
  });
});
afterAll(async () => {
  await rig.close();
  await judge.close();
});

const request = {
  model: 'gpt-4o-mini',
  max_tokens: 5,
  messages: [{ role: 'user' as const, content: 'tidy up' }],
  tools: [{ type: 'function' as const, function: { name: 'note', parameters: { type: 'object' } } }],
};

function ask(execution: string, args: string) {
  return openAiClient(rig.agent, {
    'X-Svc-Execution-Id': execution,
    'x-sim-tool-call': 'note',
    'x-sim-tool-args': args,
  }).chat.completions.create(request);
}

const judgeCalls = () => judge.requests.filter((r) => r.path === '/v1/chat/completions').length;

describe('the LLM judge in the proxy', () => {
  it('refuses what the LLM judges destructive, lets the rest through, and asks once per question', async () => {
    const before = judgeCalls();
    const error = await failure(() => ask('exec-llm-1', JSON.stringify({ text: 'now wipe the database' })));
    expect(error).toBeInstanceOf(APIError);
    expect((error as APIError).status).toBe(403);
    expect((error as APIError).message).toContain('judged DESTRUCTIVE');
    expect((error as APIError).message).toContain('by the llm judge');
    const benign = JSON.stringify({ text: 'remember to buy milk' });
    expect((await ask('exec-llm-2', benign)).choices[0]?.message.tool_calls?.[0]).toMatchObject({
      function: { name: 'note', arguments: benign },
    });
    await ask('exec-llm-3', benign);
    expect(judgeCalls() - before).toBe(2);
  });

  it('resolves a judge that does not answer in time fail-closed', async () => {
    const error = await failure(() => ask('exec-llm-4', JSON.stringify({ text: 'sim-judge:slow=5000 hello' })));
    expect((error as APIError).status).toBe(403);
    expect((error as APIError).message).toMatch(/semantic judge failed.*fail-closed/);
  });
});
