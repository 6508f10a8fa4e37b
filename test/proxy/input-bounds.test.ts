import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProxyRig, type ProxyRig } from './harness.ts';
import { anthropicClient, openAiClient } from './sdk-options.ts';

const BODY_LIMIT = 16 * 1024;
const EVENT_LIMIT = 100;

let rig: ProxyRig;

beforeAll(async () => {
  rig = await startProxyRig({
    proxy_body_limit_bytes: BODY_LIMIT,
    proxy_stream_event_limit_bytes: EVENT_LIMIT,
  });
});
afterAll(async () => {
  await rig.close();
});

async function caught(run: () => Promise<unknown>): Promise<unknown> {
  try {
    await run();
  } catch (error) {
    return error;
  }
  return undefined;
}

describe('bounded input on the LLM path', () => {
  it('refuses a request body over the limit with 413 SVC-SYS-9009 in the OpenAI format, sending nothing upstream', async () => {
    const before = rig.sim.requests.length;
    const error = await caught(() =>
      openAiClient(rig.agent).chat.completions.create({
        model: 'gpt-4o-mini',
        messages: [{ role: 'user', content: 'x'.repeat(2 * BODY_LIMIT) }],
      }),
    );
    expect(error).toBeInstanceOf(OpenAI.APIError);
    expect((error as InstanceType<typeof OpenAI.APIError>).status).toBe(413);
    expect((error as InstanceType<typeof OpenAI.APIError>).code).toBe('SVC-SYS-9009');
    expect(rig.sim.requests.length).toBe(before);
  });

  it('refuses a request body over the limit with 413 in the Anthropic format', async () => {
    const error = await caught(() =>
      anthropicClient(rig.agent).messages.create({
        model: 'claude-3-5-haiku-20241022',
        max_tokens: 8,
        messages: [{ role: 'user', content: 'x'.repeat(2 * BODY_LIMIT) }],
      }),
    );
    expect(error).toBeInstanceOf(Anthropic.APIError);
    expect((error as InstanceType<typeof Anthropic.APIError>).status).toBe(413);
    expect((error as InstanceType<typeof Anthropic.APIError>).error).toMatchObject({
      error: { type: 'request_too_large', code: 'SVC-SYS-9009' },
    });
  });

  it('ends a stream whose event is over the event limit with an error event the SDK raises', async () => {
    const stream = await openAiClient(rig.agent).chat.completions.create({
      model: 'gpt-4o-mini',
      max_tokens: 20,
      stream: true,
      messages: [{ role: 'user', content: 'hi' }],
    });
    const error = await caught(async () => {
      for await (const chunk of stream) expect(chunk).toBeDefined();
    });
    expect(error).toBeInstanceOf(OpenAI.APIError);
    expect((error as Error).message).toContain('SVC-SYS-9009');
  });
});
