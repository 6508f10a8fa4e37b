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
