import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProxyRig, type ProxyRig } from './harness.ts';
import { openAiClient } from './sdk-options.ts';

let rig: ProxyRig;

/** A streamed chat completion through the proxy by CONNECT, with the simulator's knobs in `headers`. */
function streamThroughProxy(headers: Record<string, string>) {
  return request('https://api.openai.com/v1/chat/completions', {
    method: 'POST',
    dispatcher: rig.agent,
    headers: { 'content-type': 'application/json', authorization: 'Bearer sk-test-key', ...headers },
    body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], stream: true }),
  });
}

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
    const res = await streamThroughProxy({
      'x-svc-execution-id': 'exec-stream-headers',
      'x-sim-first-event-delay-ms': String(firstEventDelayMs),
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

  it('ends the answer once the provider holds its body open past the end bound after the last event, billed by its usage', async () => {
    const started = performance.now();
    const res = await streamThroughProxy({
      'x-request-id': 'req-held-open',
      'x-svc-execution-id': 'exec-stream-held-open',
      'x-sim-output-tokens': '5',
      'x-sim-end-delay-ms': '60000',
    });
    const text = await res.body.text();
    const elapsed = performance.now() - started;
    expect(text).toContain('data: [DONE]');
    // proxy_stream_end_wait_ms (1 s by default), not the provider's minute.
    expect(elapsed).toBeGreaterThan(900);
    expect(elapsed).toBeLessThan(10_000);
    const event = await rig.usageEvent('req-held-open');
    expect(event.tokens.output).toBe(5);
    expect(event.payload).toMatchObject({ charged: 'usage', usage_source: 'provider' });
  });

  it("sends the answer's last event only once the call's usage is recorded", async () => {
    // A slow disk: every append to the proxy's outbox lands 400 ms late.
    const { outbox } = rig.proxy;
    const append = outbox.append.bind(outbox);
    const landed = new Map<string, number>();
    outbox.append = async (event) => {
      await new Promise((r) => setTimeout(r, 400));
      await append(event);
      const requestId = (event.data as { payload?: { request_id?: string } }).payload?.request_id;
      if (requestId !== undefined) landed.set(requestId, performance.now());
    };
    try {
      const res = await streamThroughProxy({
        'x-request-id': 'req-last-event',
        'x-svc-execution-id': 'exec-stream-last-event',
        'x-sim-output-tokens': '5',
      });
      let doneAt: number | undefined;
      let text = '';
      for await (const chunk of res.body) {
        text += String(chunk);
        if (doneAt === undefined && text.includes('data: [DONE]')) doneAt = performance.now();
      }
      const recordedAt = landed.get('req-last-event');
      expect(recordedAt).toBeDefined();
      expect(doneAt).toBeGreaterThanOrEqual(recordedAt as number);
    } finally {
      outbox.append = append;
    }
  });
});
