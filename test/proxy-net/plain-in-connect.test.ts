import { fetch, ProxyAgent } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ProxiedRequest } from '../../proxy/listener/index.ts';
import { metricValue, rawConnect, startRig, type Rig } from './harness.ts';

let rig: Rig;
const handled: Pick<ProxiedRequest, 'mode' | 'targetUrl'>[] = [];
let agent: ProxyAgent;

beforeAll(async () => {
  rig = await startRig({
    firstBytesTimeoutMs: 300,
    handler: (passThrough) => async (req) => {
      handled.push({ mode: req.mode, targetUrl: req.targetUrl });
      await passThrough(req);
    },
  });
  agent = new ProxyAgent({ uri: rig.proxyUrl, requestTls: { ca: rig.proxyCaPem } });
});
afterAll(async () => {
  await agent.close();
  await rig.close();
});

describe('plain HTTP inside a CONNECT to an intercepted host', () => {
  it('is served through the handler as an http:// request to the CONNECT target, not dropped as bad TLS', async () => {
    handled.length = 0;
    const answer = await rawConnect(
      rig.proxyPort,
      'api.openai.com:80',
      'GET /v1/models?limit=2 HTTP/1.1\r\nHost: api.openai.com\r\nConnection: close\r\n\r\n',
    );
    expect(answer).toMatch(/^HTTP\/1\.1 200 Connection Established\r\n\r\nHTTP\/1\.1 200 OK\r\n/);
    expect(answer).toContain('{"path":"/v1/models?limit=2","method":"GET"}');
    expect(handled.map((h) => [h.mode, h.targetUrl.href])).toEqual([
      ['intercept', 'http://api.openai.com/v1/models?limit=2'],
    ]);
  });

  it('keeps the port of the CONNECT target in the URL and serves a keep-alive connection more than once', async () => {
    handled.length = 0;
    const request = (path: string, close: boolean) =>
      `GET ${path} HTTP/1.1\r\nHost: api.openai.com:8080\r\n${close ? 'Connection: close\r\n' : ''}\r\n`;
    const answer = await rawConnect(rig.proxyPort, 'api.openai.com:8080', request('/a', false) + request('/b', true));
    expect(answer).toContain('{"path":"/a","method":"GET"}');
    expect(answer).toContain('{"path":"/b","method":"GET"}');
    expect(handled.map((h) => [h.mode, h.targetUrl.href])).toEqual([
      ['intercept', 'http://api.openai.com:8080/a'],
      ['intercept', 'http://api.openai.com:8080/b'],
    ]);
    expect(await metricValue(rig.registry, 'svc_proxy_connections_total', { mode: 'intercept' })).toBeGreaterThan(0);
  });

  it('still decrypts TLS on the same host', async () => {
    handled.length = 0;
    const res = await fetch('https://api.openai.com/v1/models', { dispatcher: agent });
    expect(res.status).toBe(200);
    expect(handled[0]?.targetUrl.href).toBe('https://api.openai.com/v1/models');
  });

  it('answers 400 SVC-SYS-9002 to bytes that are neither TLS nor HTTP, and forwards nothing', async () => {
    handled.length = 0;
    const answer = await rawConnect(rig.proxyPort, 'api.openai.com:443', '\x00\x01\x02 not a request\r\n\r\n');
    expect(answer).toMatch(/^HTTP\/1\.1 200 [^]*HTTP\/1\.1 400 /);
    expect(answer).toContain('SVC-SYS-9002');
    expect(handled).toEqual([]);
  });

  it('closes a tunnel whose client stays silent past the first-bytes timeout', async () => {
    const started = Date.now();
    const answer = await rawConnect(rig.proxyPort, 'api.openai.com:443', '', 5000);
    expect(answer).toBe('HTTP/1.1 200 Connection Established\r\n\r\n');
    expect(Date.now() - started).toBeLessThan(3000);
  });
});
