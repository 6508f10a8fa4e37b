import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ANTHROPIC_MESSAGE,
  CHAT_COMPLETION,
  metricValue,
  startRig,
  viaForwardProxy as forwardVia,
  type Rig,
} from './harness.ts';

let rig: Rig;
beforeAll(async () => {
  rig = await startRig({ egressCheck: (host) => (host === 'blocked.test' ? 'deny' : 'allow') });
});
afterAll(async () => {
  await rig.close();
});
const viaForwardProxy = (target: string, headers?: Record<string, string>) =>
  forwardVia(rig.proxyPort, target, headers);

describe('reverse mode', () => {
  it('routes /openai/... to api.openai.com (here overridden to the fake provider) and returns the answer unchanged', async () => {
    const res = await fetch(`${rig.proxyUrl}/openai/v1/chat/completions?trace=1`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        authorization: 'Bearer sk-rev',
        'x-svc-envelope-id': '6f1d4c2a-0c8e-4b7a-9e1f-3a2b5c6d7e80',
        'x-request-id': 'req-rev',
      },
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [] }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-upstream')).toBe('fake-provider');
    expect(await res.json()).toEqual(CHAT_COMPLETION);
    const seen = rig.provider.seen.find((r) => r.headers['x-request-id'] === 'req-rev');
    expect(seen?.url).toBe('/v1/chat/completions?trace=1');
    expect(seen?.headers.authorization).toBe('Bearer sk-rev');
    expect(seen?.headers['x-svc-envelope-id']).toBeUndefined();
    expect(JSON.parse(seen?.body ?? '')).toEqual({ model: 'gpt-4o-mini', messages: [] });
  });

  it('aborts the upstream request when the client goes away mid-stream', async () => {
    rig.provider.holdStream();
    const controller = new AbortController();
    const res = await fetch(`${rig.proxyUrl}/openai/stream`, { signal: controller.signal });
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toContain('"first"');
    controller.abort();
    // The upstream response closes before its last chunk: the proxy dropped the upstream request.
    expect(await rig.provider.streamClosed).toBe(false);
    rig.provider.releaseStream();
  });

  it('serves the official Anthropic SDK pointed at the proxy by its base URL', async () => {
    const client = new Anthropic({
      apiKey: 'sk-ant-test',
      baseURL: `${rig.proxyUrl}/anthropic`,
      maxRetries: 0,
      defaultHeaders: { 'x-svc-envelope-id': '7a2e5d3b-1d9f-4c8b-8f2a-4b3c6d7e8f91', 'x-request-id': 'req-ant' },
    });
    const message = await client.messages.create({
      model: 'claude-sonnet-4-5',
      max_tokens: 64,
      messages: [{ role: 'user', content: 'Hi' }],
    });
    expect(message).toEqual(ANTHROPIC_MESSAGE);
    const seen = rig.provider.seen.find((r) => r.headers['x-request-id'] === 'req-ant');
    expect(seen?.url).toBe('/v1/messages');
    // This SDK version sends its key as a bearer token.
    expect(seen?.headers.authorization ?? seen?.headers['x-api-key']).toMatch(/sk-ant-test$/);
    expect(seen?.headers['x-svc-envelope-id']).toBeUndefined();
    expect(await rig.registry.metrics()).toMatch(/svc_proxy_upstream_latency_seconds_count\{provider="anthropic"\} 1/);
  });

  it('answers 404 with SVC-SYS-9006 for a path no route serves', async () => {
    const res = await fetch(`${rig.proxyUrl}/nowhere/v1/x`);
    expect(res.status).toBe(404);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('SVC-SYS-9006');
  });
});

describe('forward mode', () => {
  it('serves a request with an expectation it does not know, which never crosses to the upstream', async () => {
    // Node would answer such a request with a bare 417 of its own, carrying no SVC code.
    const res = await viaForwardProxy(`http://127.0.0.1:${rig.httpPort}/status`, {
      expect: 'something-else',
      'x-request-id': 'req-expect',
    });
    expect(res.status).toBe(200);
    const seen = rig.provider.seen.find((r) => r.headers['x-request-id'] === 'req-expect');
    expect(seen?.headers.expect).toBeUndefined();
  });

  it('forwards an absolute-URI http request, without proxy or x-svc headers', async () => {
    const res = await viaForwardProxy(`http://127.0.0.1:${rig.httpPort}/status?x=1`, {
      'proxy-authorization': 'Basic c2VjcmV0',
      'X-Svc-Tenant-Id': 't-1',
      'x-request-id': 'req-fwd',
    });
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toEqual({ path: '/status?x=1', method: 'GET' });
    const seen = rig.provider.seen.find((r) => r.headers['x-request-id'] === 'req-fwd');
    expect(seen?.headers['proxy-authorization']).toBeUndefined();
    expect(seen?.headers['x-svc-tenant-id']).toBeUndefined();
    expect(await metricValue(rig.registry, 'svc_proxy_connections_total', { mode: 'forward' })).toBeGreaterThanOrEqual(
      1,
    );
  });

  it('applies upstream overrides to forward requests too', async () => {
    const res = await viaForwardProxy('http://plain.test/models');
    expect(JSON.parse(res.body)).toEqual({ path: '/models', method: 'GET' });
  });

  it('refuses a forward request the egress check denies with 403 SVC-ADP-5003', async () => {
    const res = await viaForwardProxy('http://blocked.test/');
    expect(res.status).toBe(403);
    expect((JSON.parse(res.body) as { error: { code: string } }).error.code).toBe('SVC-ADP-5003');
  });

  it('answers 502 SVC-ADP-5001 when the upstream is unreachable', async () => {
    const res = await viaForwardProxy('http://127.0.0.1:1/');
    expect(res.status).toBe(502);
    expect((JSON.parse(res.body) as { error: { code: string; request_id: string } }).error.code).toBe('SVC-ADP-5001');
  });
});
