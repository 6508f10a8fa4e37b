import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rawConnect, viaForwardProxy } from '../proxy-net/harness.ts';
import { startProxyRig, type ProxyRig } from './harness.ts';

let rig: ProxyRig;
let proxyPort = 0;

beforeAll(async () => {
  // compat.local is an OpenAI-compatible host on port 8000 (the rig's proxy_compatible_hosts).
  rig = await startProxyRig();
  proxyPort = Number(new URL(rig.addresses.proxyUrl).port);
});
afterAll(async () => {
  await rig.close();
});

const chat = JSON.stringify({ model: 'gpt-4o-mini', max_tokens: 4, messages: [{ role: 'user', content: 'hi' }] });
const errorCode = (body: string): unknown => (JSON.parse(body) as { error: { code: string } }).error.code;

describe('ports of a governed host', () => {
  it('intercepts and governs a CONNECT to a provider host on port 80, never a blind tunnel', async () => {
    const request =
      'POST /v1/chat/completions HTTP/1.1\r\nHost: api.openai.com\r\ncontent-type: application/json\r\n' +
      `authorization: Bearer sk\r\nx-request-id: connect-port-80\r\ncontent-length: ${Buffer.byteLength(chat)}\r\n` +
      `connection: close\r\n\r\n${chat}`;
    const answer = await rawConnect(proxyPort, 'api.openai.com:80', request, 10_000);
    expect(answer).toMatch(/^HTTP\/1\.1 200 Connection Established\r\n\r\nHTTP\/1\.1 200 OK\r\n/);
    expect((await rig.usageEvent('connect-port-80')).model).toBe('gpt-4o-mini');
    expect(await rig.proxy.registry.getSingleMetricAsString('svc_proxy_connections_total')).toMatch(
      /mode="intercept"} [1-9]/,
    );
  });

  it('refuses a CONNECT to another port of a host governed on one port only, with 403 SVC-ADP-5003', async () => {
    const answer = await rawConnect(proxyPort, 'compat.local:80', 'GET /v1/models HTTP/1.1\r\n\r\n');
    expect(answer).toMatch(/^HTTP\/1\.1 403 /);
    const body = answer.slice(answer.indexOf('\r\n\r\n') + 4);
    expect(errorCode(body)).toBe('SVC-ADP-5003');
    expect(body).toContain('compat.local is governed on other ports only');
  });

  it('refuses a forward request to another port of such a host instead of relaying it ungoverned', async () => {
    const before = rig.sim.requests.length;
    const res = await viaForwardProxy(
      proxyPort,
      'http://compat.local/v1/chat/completions',
      { 'content-type': 'application/json', authorization: 'Bearer sk' },
      chat,
    );
    expect(res.status).toBe(403);
    expect(errorCode(res.body)).toBe('SVC-ADP-5003');
    expect(rig.sim.requests.length).toBe(before);
  });

  it('still governs a forward request to a provider host on any port', async () => {
    const res = await viaForwardProxy(
      proxyPort,
      'http://api.openai.com/v1/chat/completions',
      { 'content-type': 'application/json', authorization: 'Bearer sk', 'x-request-id': 'forward-port-80' },
      chat,
    );
    expect(res.status).toBe(200);
    expect((await rig.usageEvent('forward-port-80')).model).toBe('gpt-4o-mini');
  });
});
