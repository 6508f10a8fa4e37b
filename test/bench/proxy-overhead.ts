/**
 * Proxy overhead benchmark: sequential keep-alive requests to a local origin, direct and through
 * the proxy (reverse mode over HTTP, intercept mode over CONNECT + TLS), printing the latency the
 * proxy adds at p50 and p99 in microseconds, beside a bare node:http + undici relay as the floor.
 * The proxy runs in its own process, as a sidecar does.
 *
 *   node test/bench/proxy-overhead.ts [request pairs=5000]
 */
import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { pipeline } from 'node:stream/promises';
import { Registry } from 'prom-client';
import { Agent, ProxyAgent, request, type Dispatcher } from 'undici';
import { createProxyNetMetrics } from '../../proxy/admin/index.ts';
import { passThroughHandler, ProxyListener } from '../../proxy/listener/index.ts';
import { generateCa, LeafCertificateCache } from '../../proxy/tls/index.ts';
import { parseUpstreamOverrides, UpstreamClient } from '../../proxy/upstream/index.ts';
import { upstreamCredentials } from '../proxy-net/harness.ts';

interface ProxyConfig {
  httpPort: number;
  httpsPort: number;
  upstreamCaPem: string;
}

interface ProxyReady {
  port: number;
  barePort: number;
  caPem: string;
}

const BODY = JSON.stringify({ id: 'chatcmpl-bench', choices: [{ message: { role: 'assistant', content: 'ok' } }] });

function origin(_req: IncomingMessage, res: ServerResponse): void {
  _req.resume();
  _req.on('end', () => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(BODY) });
    res.end(BODY);
  });
}

/** The child process: one proxy listener, intercepting bench.test, reverse route /bench. */
async function serveProxy(config: ProxyConfig): Promise<void> {
  const ca = await generateCa();
  const registry = new Registry();
  const metrics = createProxyNetMetrics(registry);
  const upstream = new UpstreamClient({
    overrides: parseUpstreamOverrides(`bench.test=https://127.0.0.1:${config.httpsPort}`),
    ca: [config.upstreamCaPem],
    metrics,
  });
  const listener = new ProxyListener({
    handler: passThroughHandler(upstream, { providerOf: () => 'bench' }),
    interceptHost: (host) => host === 'bench.test',
    leafCertificates: await LeafCertificateCache.create({ caCertPem: ca.certPem, caKeyPem: ca.keyPem }),
    reverseRoutes: { '/bench': `http://127.0.0.1:${config.httpPort}` },
    metrics,
    // No admin port here: links point where a sidecar's admin port would serve the pages.
    documentationBase: () => 'http://127.0.0.1:9464',
    port: 0,
    host: '127.0.0.1',
  });
  const { port } = await listener.listen();
  // The floor: the least any Node relay costs (node:http in, undici out, no proxy logic at all).
  const bareAgent = new Agent();
  const bare = createHttpServer((req, res) => {
    void bareAgent
      .request({
        origin: `http://127.0.0.1:${config.httpPort}`,
        path: req.url ?? '/',
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: req,
      })
      .then(async (up) => {
        res.writeHead(up.statusCode, { 'content-type': 'application/json' });
        await pipeline(up.body, res);
      })
      .catch(() => res.destroy());
  }).listen(0, '127.0.0.1');
  await once(bare, 'listening');
  const barePort = (bare.address() as AddressInfo).port;
  process.send?.({ port, barePort, caPem: ca.certPem } satisfies ProxyReady);
  process.on('message', () => {
    void registry.metrics().then((text) => {
      const read = (suffix: string): number =>
        Number(new RegExp(`^svc_proxy_added_latency_seconds_${suffix} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
      process.send?.({ meanAddedUs: (read('sum') / read('count')) * 1e6 }, () => process.exit(0));
    });
  });
}

async function timeOne(dispatcher: Dispatcher, url: string): Promise<number> {
  const start = process.hrtime.bigint();
  const res = await request(url, {
    method: 'POST',
    body: '{"model":"gpt-4o-mini"}',
    headers: { 'content-type': 'application/json' },
    dispatcher,
  });
  await res.body.arrayBuffer();
  return Number(process.hrtime.bigint() - start) / 1000;
}

/** Direct and proxied requests alternate, so that load from elsewhere on the machine hits both alike. */
async function timePairs(
  direct: [Dispatcher, string],
  proxied: [Dispatcher, string],
  n: number,
): Promise<{ direct: number[]; proxied: number[] }> {
  const samples = { direct: [] as number[], proxied: [] as number[] };
  for (let i = 0; i < n; i += 1) {
    samples.direct.push(await timeOne(...direct));
    samples.proxied.push(await timeOne(...proxied));
  }
  samples.direct.sort((a, b) => a - b);
  samples.proxied.sort((a, b) => a - b);
  return samples;
}

const percentile = (sorted: number[], p: number): number =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;

async function main(): Promise<void> {
  const n = Number(process.argv[2] ?? 5000);
  const warmup = Math.min(500, n);
  const creds = await upstreamCredentials();
  const httpServer = createHttpServer(origin).listen(0, '127.0.0.1');
  const httpsServer = createHttpsServer({ key: creds.key, cert: creds.cert }, origin).listen(0, '127.0.0.1');
  await Promise.all([once(httpServer, 'listening'), once(httpsServer, 'listening')]);
  const httpPort = (httpServer.address() as AddressInfo).port;
  const httpsPort = (httpsServer.address() as AddressInfo).port;

  const child: ChildProcess = fork(import.meta.filename, [
    '--serve-proxy',
    JSON.stringify({ httpPort, httpsPort, upstreamCaPem: creds.ca.certPem } satisfies ProxyConfig),
  ]);
  const [ready] = (await once(child, 'message')) as [ProxyReady];

  const direct = new Agent({ connect: { ca: creds.ca.certPem } });
  const viaProxy = new ProxyAgent({ uri: `http://127.0.0.1:${ready.port}`, requestTls: { ca: ready.caPem } });
  const reverseUrl = `http://127.0.0.1:${ready.port}/bench/v1/chat/completions`;
  const cases: [string, Dispatcher, string, Dispatcher, string][] = [
    [
      'bare Node relay, for reference',
      direct,
      `http://127.0.0.1:${httpPort}/v1/chat/completions`,
      direct,
      `http://127.0.0.1:${ready.barePort}/v1/chat/completions`,
    ],
    ['reverse (HTTP)', direct, `http://127.0.0.1:${httpPort}/v1/chat/completions`, direct, reverseUrl],
    [
      'intercept (CONNECT + TLS)',
      direct,
      `https://127.0.0.1:${httpsPort}/v1/chat/completions`,
      viaProxy,
      'https://bench.test/v1/chat/completions',
    ],
  ];

  console.log(
    `Proxy overhead: ${n} sequential keep-alive request pairs (direct, proxied) per mode after ${warmup} warm-up pairs; µs`,
  );
  console.log('| mode | direct p50 | direct p99 | proxied p50 | proxied p99 | added p50 | added p99 |');
  console.log('|---|---:|---:|---:|---:|---:|---:|');
  for (const [name, directAgent, directUrl, proxyAgent, proxiedUrl] of cases) {
    await timePairs([directAgent, directUrl], [proxyAgent, proxiedUrl], warmup);
    const { direct: d, proxied: p } = await timePairs([directAgent, directUrl], [proxyAgent, proxiedUrl], n);
    const row = [
      percentile(d, 50),
      percentile(d, 99),
      percentile(p, 50),
      percentile(p, 99),
      percentile(p, 50) - percentile(d, 50),
      percentile(p, 99) - percentile(d, 99),
    ];
    console.log(`| ${name} | ${row.map((v) => v.toFixed(0)).join(' | ')} |`);
  }
  child.send('report');
  const [report] = (await once(child, 'message')) as [{ meanAddedUs: number }];
  console.log(
    `\nProxy's own time before the upstream send (svc_proxy_added_latency_seconds), mean: ${report.meanAddedUs.toFixed(1)} µs`,
  );

  await Promise.all([direct.close(), viaProxy.close()]);
  httpServer.close();
  httpsServer.close();
  httpServer.closeAllConnections();
  httpsServer.closeAllConnections();
}

if (process.argv[2] === '--serve-proxy') await serveProxy(JSON.parse(process.argv[3] ?? '{}') as ProxyConfig);
else await main();
