import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isSvcError } from '../../core/errors/index.ts';
import { createProxyNetMetrics } from '../admin/index.ts';
import { parseUpstreamOverrides } from './overrides.ts';
import { UpstreamClient } from './upstream-client.ts';

interface Seen {
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

let server: Server;
let port: number;
const seen: Seen[] = [];
const registry = new Registry();
let client: UpstreamClient;

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
    req.on('end', () => {
      seen.push({ url: req.url ?? '', headers: req.headers, body });
      res.writeHead(200, { 'content-type': 'text/plain', connection: 'keep-alive', 'keep-alive': 'timeout=5' });
      res.write('one,');
      setTimeout(() => res.end('two'), 20);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
  client = new UpstreamClient({
    overrides: parseUpstreamOverrides(`api.example.test=http://127.0.0.1:${port}/base`),
    metrics: createProxyNetMetrics(registry),
  });
});
afterAll(async () => {
  await client.close();
  server.close();
});

describe('UpstreamClient', () => {
  it('sends a rewritten buffer body with its own length, to the override, without hop-by-hop or x-svc fields', async () => {
    const res = await client.request({
      url: new URL('https://api.example.test/v1/messages?beta=1'),
      method: 'POST',
      headers: {
        'content-length': '999',
        'content-type': 'application/json',
        'x-svc-envelope-id': 'e',
        connection: 'close',
        host: 'api.example.test',
      },
      body: Buffer.from('{"rewritten":true}'),
      provider: 'anthropic',
      receivedAt: process.hrtime.bigint(),
    });
    const chunks: string[] = [];
    for await (const chunk of res.body) chunks.push((chunk as Buffer).toString('utf8'));
    expect(chunks.join('')).toBe('one,two');
    expect(res.statusCode).toBe(200);
    expect(res.headers).not.toHaveProperty('connection');
    expect(res.headers).not.toHaveProperty('keep-alive');
    const last = seen.at(-1);
    expect(last?.url).toBe('/base/v1/messages?beta=1');
    expect(last?.body).toBe('{"rewritten":true}');
    expect(last?.headers['content-length']).toBe('18');
    expect(last?.headers['x-svc-envelope-id']).toBeUndefined();
    expect(last?.headers.host).toBe(`127.0.0.1:${port}`);
    const text = await registry.metrics();
    expect(text).toMatch(/svc_proxy_upstream_latency_seconds_count\{provider="anthropic"\} 1/);
    expect(text).toMatch(/svc_proxy_added_latency_seconds_count 1/);
  });

  it('streams a request body given as a stream', async () => {
    await client
      .request({
        url: new URL(`http://127.0.0.1:${port}/upload`),
        method: 'POST',
        headers: { 'transfer-encoding': 'chunked' },
        body: Readable.from([Buffer.from('part-1;'), Buffer.from('part-2')]),
      })
      .then((res) => res.body.resume());
    expect(seen.at(-1)?.body).toBe('part-1;part-2');
  });

  it('maps an unreachable upstream to SVC-ADP-5001 naming the origin', async () => {
    const error: unknown = await client
      .request({ url: new URL('http://127.0.0.1:1/x'), method: 'GET', headers: {} })
      .catch((e: unknown) => e);
    expect(isSvcError(error) && error.code).toBe('SVC-ADP-5001');
    expect(isSvcError(error) && error.details.upstream).toBe('http://127.0.0.1:1');
  });
});
