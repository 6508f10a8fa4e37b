import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../harness/control-plane.ts';
import { startProxyRig, type ProxyRig } from './harness.ts';
import { anthropicClient } from './sdk-options.ts';

let rig: ProxyRig;

beforeAll(async () => {
  rig = await startProxyRig();
});
afterAll(async () => {
  await rig.close();
});

describe('official Anthropic SDK, streaming, through CONNECT interception', () => {
  it('relays events as they arrive and meters the stream into the envelope', async () => {
    const client = anthropicClient(rig.agent, {
      'X-Svc-Execution-Id': 'exec-claude-stream',
      'x-sim-chunk-delay-ms': '40',
    });
    const { data: stream, response } = await client.messages
      .create({
        model: 'claude-3-5-haiku-20241022',
        max_tokens: 10,
        stream: true,
        messages: [{ role: 'user', content: 'Count' }],
      })
      .withResponse();
    const seen = rig.sim.requests.at(-1);
    let firstArrivedBeforeLastSent: boolean | undefined;
    let text = '';
    let outputTokens = 0;
    for await (const event of stream) {
      // usageSent is set by the simulator only once it has written its last event.
      firstArrivedBeforeLastSent ??= seen?.usageSent === undefined;
      if (event.type === 'content_block_delta' && event.delta.type === 'text_delta') text += event.delta.text;
      if (event.type === 'message_delta') outputTokens = event.usage.output_tokens;
    }
    expect(firstArrivedBeforeLastSent).toBe(true);
    expect(text.trim().split(' ')).toHaveLength(10);
    expect(outputTokens).toBe(10);

    const envelopeId = String(response.headers.get('x-svc-envelope-id'));
    const expected = rig.priced('claude-3-5-haiku-20241022', seen?.usageSent);
    const envelope = await eventually(
      () => rig.envelope(envelopeId),
      (e) => e?.cost_summary.llm_calls === 1,
    );
    expect(envelope?.cost_summary.tokens_input).toBe(seen?.usageSent?.input);
    expect(envelope?.cost_summary.tokens_output).toBe(10);
    expect(envelope?.cost_summary.cost_usd).toBeCloseTo(expected, 6);
  });
});

describe('prompt cache writes through the Anthropic SDK', () => {
  it('charges input written to the cache at the write rate of how long it is kept, whole and streamed', async () => {
    const cache = {
      'x-sim-input-tokens': '10000',
      'x-sim-cached-tokens': '1000',
      'x-sim-cache-write-tokens': '2000',
      'x-sim-cache-write-long-tokens': '3000',
    };
    const request = {
      model: 'claude-sonnet-4-20250514',
      max_tokens: 8,
      messages: [{ role: 'user' as const, content: 'Summarise the cached document' }],
    };
    const whole = await anthropicClient(rig.agent, { ...cache, 'X-Request-Id': 'cache-whole' }).messages.create(
      request,
    );
    expect(whole.usage.cache_creation_input_tokens).toBe(5000);
    const stream = await anthropicClient(rig.agent, { ...cache, 'X-Request-Id': 'cache-stream' }).messages.create({
      ...request,
      stream: true,
    });
    for await (const event of stream) void event;
    // Claude Sonnet 4: input 3, cache reads 0.30, writes 3.75 (five minutes) and 6 (the hour), output 15.
    const expected = (4_000 * 3 + 1_000 * 0.3 + 2_000 * 3.75 + 3_000 * 6 + 8 * 15) / 1e6;
    for (const id of ['cache-whole', 'cache-stream']) {
      const event = await rig.usageEvent(id);
      expect(event.tokens, id).toEqual({ input: 10_000, output: 8 });
      expect(event.payload, id).toMatchObject({
        cache_write_input_tokens: 2_000,
        cache_write_long_input_tokens: 3_000,
      });
      expect(event.cost_usd, id).toBeCloseTo(expected, 12);
    }
  });
});
