import { request } from 'undici';
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

describe('a streamed answer flows through the proxy', () => {
  it('reaches the agent chunk by chunk while the upstream is still sending, not all at the end', async () => {
    const chunks = 200;
    const delayMs = 5;
    const stream = await openAiClient(rig.agent, {
      'X-Svc-Execution-Id': 'exec-stream-flow',
      'x-sim-output-tokens': String(chunks),
      'x-sim-chunk-delay-ms': String(delayMs),
    }).chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'count' }],
      stream: true,
    });
    const arrivals: number[] = [];
    let text = '';
    for await (const chunk of stream) {
      const delta = chunk.choices[0]?.delta.content;
      if (delta === undefined || delta === null || delta === '') continue;
      arrivals.push(performance.now());
      text += delta;
    }
    expect(arrivals).toHaveLength(chunks);
    expect(text.trim().split(' ')).toHaveLength(chunks);
    // The upstream spends at least (chunks - 1) × delay between its first and last delta. A proxy
    // that held the answer until the end would deliver every chunk within a few milliseconds.
    const upstreamSpan = (chunks - 1) * delayMs;
    const first = arrivals[0] as number;
    const last = arrivals.at(-1) as number;
    expect(last - first).toBeGreaterThan(upstreamSpan * 0.8);
    // Half-way through the answer, at least a third of it has reached the agent.
    const halfway = first + (last - first) / 2;
    expect(arrivals.filter((t) => t < halfway).length).toBeGreaterThan(chunks / 3);
  });

  it('answers with its headers while the model has not yet sent its first event', async () => {
    const firstEventDelayMs = 1500;
    const started = performance.now();
    const res = await request('https://api.openai.com/v1/chat/completions', {
      method: 'POST',
      dispatcher: rig.agent,
      headers: {
        'content-type': 'application/json',
        authorization: 'Bearer sk-test-key',
        'x-svc-execution-id': 'exec-stream-headers',
        'x-sim-first-event-delay-ms': String(firstEventDelayMs),
      },
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], stream: true }),
    });
    const headersAfter = performance.now() - started;
    expect(res.statusCode).toBe(200);
    const text = await res.body.text();
    const answeredAfter = performance.now() - started;
    expect(text).toContain('data: [DONE]');
    // The events wait on the model; the headers do not.
    expect(answeredAfter).toBeGreaterThan(firstEventDelayMs);
    expect(headersAfter).toBeLessThan(answeredAfter - firstEventDelayMs / 2);
  });
});
