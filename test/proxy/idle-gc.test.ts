import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { eventually } from '../harness/eventually.ts';
import { startProxyRig, type ProxyRig } from './harness.ts';

const IDLE_MS = 300;
let rig: ProxyRig;
const gc = vi.fn();

beforeAll(async () => {
  rig = await startProxyRig({ proxy_idle_gc_ms: IDLE_MS }, { gc: gc as unknown as NodeJS.GCFunction });
});
afterAll(async () => {
  await rig.close();
});

/** A chat completion through the proxy's reverse route; `headers` carry the simulator's knobs. */
function send(stream: boolean, headers: Record<string, string> = {}, signal?: AbortSignal) {
  return request(`http://127.0.0.1:${rig.addresses.proxyPort}/openai/v1/chat/completions`, {
    method: 'POST',
    signal,
    headers: { 'content-type': 'application/json', authorization: 'Bearer sk-test-key', ...headers },
    body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], stream }),
  });
}

/** `send`, read whole: the answer must be a success. */
async function chat(stream: boolean, headers: Record<string, string> = {}): Promise<string> {
  const res = await send(stream, headers);
  const text = await res.body.text();
  expect(res.statusCode, text).toBe(200);
  return text;
}

async function collectionsCounted(): Promise<number> {
  const res = await request(`http://127.0.0.1:${rig.addresses.adminPort}/metrics`);
  const line = /^svc_proxy_idle_gc_total (\d+)$/m.exec(await res.body.text());
  return Number(line?.[1] ?? NaN);
}

describe('the proxy gives memory back once idle', () => {
  it('collects once after the start, with no call made', async () => {
    await eventually(
      () => gc.mock.calls.length,
      (n) => n === 1,
      5000,
    );
    await new Promise((resolve) => setTimeout(resolve, IDLE_MS * 3));
    expect(gc).toHaveBeenCalledTimes(1);
    expect(gc).toHaveBeenCalledWith({ type: 'major', flavor: 'last-resort' });
    expect(await collectionsCounted()).toBe(1);
  });

  it('collects once after its calls, never while a stream is still flowing, and counts it', async () => {
    const before = gc.mock.calls.length;
    const counted = await collectionsCounted();
    await chat(false);
    await eventually(
      () => gc.mock.calls.length,
      (n) => n === before + 1,
      5000,
    );
    expect(await collectionsCounted()).toBe(counted + 1);

    // A stream of 40 events 50 ms apart flows for about 2 s, far longer than the quiet time:
    // nothing is collected until it has ended.
    const streaming = chat(true, { 'x-sim-output-tokens': '40', 'x-sim-chunk-delay-ms': '50' });
    await new Promise((resolve) => setTimeout(resolve, IDLE_MS * 4));
    expect(gc).toHaveBeenCalledTimes(before + 1);
    expect(await streaming).toContain('[DONE]');
    await eventually(
      () => gc.mock.calls.length,
      (n) => n === before + 2,
      5000,
    );
    // Idle on, nothing more: one collection per idle spell.
    await new Promise((resolve) => setTimeout(resolve, IDLE_MS * 3));
    expect(gc).toHaveBeenCalledTimes(before + 2);
    expect(await collectionsCounted()).toBe(counted + 2);
  });

  it('counts the rest of an answer read after its client left as work: no collection until it is read', async () => {
    const before = gc.mock.calls.length;
    // 80 events 50 ms apart: the upstream sends for about 4 s; the client leaves after the first.
    const controller = new AbortController();
    const res = await send(true, { 'x-sim-output-tokens': '80', 'x-sim-chunk-delay-ms': '50' }, controller.signal);
    for await (const _ of res.body) break;
    controller.abort();
    const left = performance.now();
    // The proxy reads on to bill the answer: the quiet time passes several times over meanwhile.
    await new Promise((resolve) => setTimeout(resolve, IDLE_MS * 4));
    expect(gc).toHaveBeenCalledTimes(before);
    await eventually(
      () => gc.mock.calls.length,
      (n) => n === before + 1,
      10_000,
    );
    // Collected only once the answer was read to its end, not a quiet time after the client left.
    expect(performance.now() - left).toBeGreaterThan(2000);
  });
});
