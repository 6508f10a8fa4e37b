import { randomBytes, webcrypto } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { createServer as createHttpServer, request, type Server as HttpServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { connect, createServer as createTcpServer, type AddressInfo, type Server as TcpServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { createProxyNetMetrics, type ProxyNetMetrics } from '../../proxy/admin/index.ts';
import { AddressPolicy, EgressGuard, type AddressPolicyOptions, type Resolve } from '../../proxy/egress/index.ts';
import {
  passThroughHandler,
  ProxyListener,
  type ProxyHandler,
  type ProxyListenerOptions,
} from '../../proxy/listener/index.ts';
import { generateCa } from '../../proxy/tls/ca-generate.ts';
import { importCaKey } from '../../proxy/tls/ca-key.ts';
import { caSigner } from '../../proxy/tls/ca-signer.ts';
import { LeafCertificateCache, type CaPem } from '../../proxy/tls/index.ts';
import { mintLeafCertificate } from '../../proxy/tls/leaf-mint.ts';
import { toPem } from '../../proxy/tls/webcrypto.ts';
import { parseUpstreamOverrides, UpstreamClient } from '../../proxy/upstream/index.ts';

export interface SeenRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

export const CHAT_COMPLETION = {
  id: 'chatcmpl-test-1',
  object: 'chat.completion',
  created: 1_700_000_000,
  model: 'gpt-4o-mini',
  choices: [
    {
      index: 0,
      message: { role: 'assistant', content: 'Hello through the proxy.', refusal: null },
      finish_reason: 'stop',
      logprobs: null,
    },
  ],
  usage: { prompt_tokens: 9, completion_tokens: 5, total_tokens: 14 },
};

export const ANTHROPIC_MESSAGE = {
  id: 'msg_test_1',
  type: 'message',
  role: 'assistant',
  model: 'claude-sonnet-4-5',
  content: [{ type: 'text', text: 'Hello from the fake provider.' }],
  stop_reason: 'end_turn',
  stop_sequence: null,
  usage: { input_tokens: 7, output_tokens: 6 },
};

/**
 * A local server posing as a provider. It records every request, answers chat completions,
 * serves a fixed binary payload, and streams two chunks with a gate between them so that a test
 * can prove the first chunk arrived before the last was sent.
 */
export class FakeProvider {
  readonly seen: SeenRequest[] = [];
  readonly binary = randomBytes(256 * 1024);
  /** Set when the last streamed chunk is written. */
  lastChunkSent = false;
  /** Resolves with whether the last chunk had been sent when a `/stream` response closed. */
  streamClosed: Promise<boolean> = Promise.resolve(false);
  #releaseStream: (() => void) | undefined;
  #streamGate: Promise<void> = Promise.resolve();

  /** Holds `/stream` after its first chunk until `releaseStream()` (or 5 s pass). */
  holdStream(): void {
    this.lastChunkSent = false;
    this.#streamGate = new Promise<void>((resolve) => {
      this.#releaseStream = resolve;
      setTimeout(resolve, 5000).unref();
    });
  }

  releaseStream(): void {
    this.#releaseStream?.();
  }

  readonly handle = (req: IncomingMessage, res: ServerResponse): void => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      this.seen.push({
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
      });
      void this.#answer(req, res);
    });
  };

  async #answer(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '').split('?')[0];
    if (path?.endsWith('/chat/completions')) {
      res.writeHead(200, { 'content-type': 'application/json', 'x-upstream': 'fake-provider' });
      res.end(JSON.stringify(CHAT_COMPLETION));
    } else if (path === '/v1/messages') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(ANTHROPIC_MESSAGE));
    } else if (path === '/binary') {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': this.binary.length });
      res.end(this.binary);
    } else if (path === '/stream') {
      this.streamClosed = new Promise((resolve) => res.once('close', () => resolve(this.lastChunkSent)));
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: {"delta":"first"}\n\n');
      await this.#streamGate;
      this.lastChunkSent = true;
      res.end('data: {"delta":"last"}\n\ndata: [DONE]\n\n');
    } else {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ path: req.url, method: req.method }));
    }
  }
}

/** A certificate for 127.0.0.1 signed by its own CA, as an upstream the proxy must be told to trust. */
export async function upstreamCredentials(): Promise<{ ca: CaPem; key: string; cert: string }> {
  const ca = await generateCa('Upstream Test CA');
  const signer = caSigner(ca.certPem, await importCaKey(ca.certPem, ca.keyPem));
  const keys = await webcrypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, true, ['sign', 'verify']);
  const leaf = await mintLeafCertificate(signer, keys.publicKey, '127.0.0.1');
  return {
    ca,
    key: toPem(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey), 'PRIVATE KEY'),
    cert: leaf.toString('pem'),
  };
}

export async function listen(server: HttpServer): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

export async function closeServer(server: HttpServer): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeAllConnections();
  await closed;
}

export interface Rig {
  dir: string;
  provider: FakeProvider;
  httpsPort: number;
  httpPort: number;
  proxyPort: number;
  proxyUrl: string;
  proxyCaPem: string;
  proxyCaFile: string;
  upstreamCaPem: string;
  leafCertificates: LeafCertificateCache;
  registry: Registry;
  metrics: ProxyNetMetrics;
  upstream: UpstreamClient;
  listener: ProxyListener;
  close(): Promise<void>;
}

export interface RigOptions {
  /** Wraps the pass-through handler, e.g. to make some requests fail. */
  handler?: (passThrough: ProxyHandler) => ProxyHandler;
  egressCheck?: ProxyListenerOptions['egressCheck'];
  logger?: ProxyListenerOptions['logger'];
  /** Which CONNECT targets are intercepted; api.openai.com on any port when absent. */
  interceptHost?: ProxyListenerOptions['interceptHost'];
  /** Name resolution and address policy of the egress guard shared by the listener and the upstream client. */
  resolve?: Resolve;
  addressPolicy?: AddressPolicyOptions;
  firstBytesTimeoutMs?: number;
  tunnelHandshakeTimeoutMs?: number;
  tunnelIdleTimeoutMs?: number;
}

/**
 * The proxy as an agent meets it: a listener on a free port intercepting api.openai.com, whose
 * upstream is overridden to a local HTTPS fake provider trusted through the extra upstream CA;
 * a plain HTTP fake provider beside it for forward and reverse requests.
 */
export async function startRig(options: RigOptions = {}): Promise<Rig> {
  const dir = await mkdtemp(join(tmpdir(), 'proxy-net-'));
  const provider = new FakeProvider();
  const creds = await upstreamCredentials();
  const httpsServer = createHttpsServer({ key: creds.key, cert: creds.cert }, provider.handle);
  const httpServer = createHttpServer(provider.handle);
  const httpsPort = await listen(httpsServer);
  const httpPort = await listen(httpServer);

  const proxyCa = await generateCa();
  const proxyCaFile = join(dir, 'proxy-ca.pem');
  await writeFile(proxyCaFile, proxyCa.certPem);
  const leafCertificates = await LeafCertificateCache.create({ caCertPem: proxyCa.certPem, caKeyPem: proxyCa.keyPem });
  const registry = new Registry();
  const metrics = createProxyNetMetrics(registry);
  const guard = new EgressGuard({
    policy: new AddressPolicy(options.addressPolicy),
    ...(options.resolve === undefined ? {} : { resolve: options.resolve }),
    onRefused: () => metrics.egressRefusals.inc({ reason: 'address' }),
  });
  const upstream = new UpstreamClient({
    guard,
    overrides: parseUpstreamOverrides(
      `api.openai.com=https://127.0.0.1:${httpsPort},api.anthropic.com=https://127.0.0.1:${httpsPort},plain.test=http://127.0.0.1:${httpPort}`,
    ),
    ca: [creds.ca.certPem],
    metrics,
  });
  const passThrough = passThroughHandler(upstream);
  const listener = new ProxyListener({
    handler: options.handler?.(passThrough) ?? passThrough,
    interceptHost: options.interceptHost ?? ((host) => host === 'api.openai.com'),
    egressCheck: options.egressCheck,
    egressGuard: guard,
    ...(options.firstBytesTimeoutMs === undefined ? {} : { firstBytesTimeoutMs: options.firstBytesTimeoutMs }),
    ...(options.tunnelHandshakeTimeoutMs === undefined
      ? {}
      : { tunnelHandshakeTimeoutMs: options.tunnelHandshakeTimeoutMs }),
    ...(options.tunnelIdleTimeoutMs === undefined ? {} : { tunnelIdleTimeoutMs: options.tunnelIdleTimeoutMs }),
    logger: options.logger,
    leafCertificates,
    reverseRoutes: {
      '/openai': 'https://api.openai.com',
      '/anthropic': 'https://api.anthropic.com',
      '/plain': `http://127.0.0.1:${httpPort}`,
    },
    metrics,
    // No admin port here: links point where a sidecar's admin port would serve the pages.
    documentationBase: () => 'http://127.0.0.1:9464',
    port: 0,
    host: '127.0.0.1',
  });
  const { port: proxyPort } = await listener.listen();
  return {
    dir,
    provider,
    httpsPort,
    httpPort,
    proxyPort,
    proxyUrl: `http://127.0.0.1:${proxyPort}`,
    proxyCaPem: proxyCa.certPem,
    proxyCaFile,
    upstreamCaPem: creds.ca.certPem,
    leafCertificates,
    registry,
    metrics,
    upstream,
    listener,
    async close() {
      await listener.close();
      await upstream.close();
      await Promise.all([closeServer(httpsServer), closeServer(httpServer)]);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

export async function metricValue(registry: Registry, name: string, labels: Record<string, string>): Promise<number> {
  const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === name);
  const value = metric?.values.find((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l));
  return value?.value ?? 0;
}

/**
 * A forward-proxy request as an HTTP_PROXY client sends it: absolute URI on the proxy's port; a
 * GET, or a POST of `body` when one is given.
 */
export async function viaForwardProxy(
  proxyPort: number,
  target: string,
  headers: Record<string, string> = {},
  body?: string,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port: proxyPort,
        method: body === undefined ? 'GET' : 'POST',
        path: target,
        headers: { host: new URL(target).host, ...headers },
      },
      (res) => {
        let body = '';
        res.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * Sends one raw CONNECT, then `payload` once the tunnel is up, and returns everything the proxy
 * answers until it closes, or until `waitMs` pass.
 */
export async function rawConnect(proxyPort: number, authority: string, payload = '', waitMs = 2000): Promise<string> {
  const socket = connect(proxyPort, '127.0.0.1');
  socket.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`);
  let answer = '';
  let sent = false;
  socket.on('data', (chunk: Buffer) => {
    answer += chunk.toString('utf8');
    if (!sent && payload !== '' && answer.startsWith('HTTP/1.1 200 ')) {
      sent = true;
      socket.write(payload);
    }
  });
  await new Promise<void>((resolve) => {
    socket.once('close', () => resolve());
    setTimeout(() => {
      socket.destroy();
      resolve();
    }, waitMs).unref();
  });
  return answer;
}

/** A TCP server on 127.0.0.1 that echoes what it receives, prefixed so that an echo is recognisable. */
export async function startEcho(): Promise<{ port: number; connections: number; close(): Promise<void> }> {
  const state = { port: 0, connections: 0, close: () => Promise.resolve() };
  const server: TcpServer = createTcpServer((socket) => {
    state.connections += 1;
    socket.on('data', (chunk: Buffer) => socket.end(`echo:${chunk.toString('utf8')}`));
    socket.on('error', () => socket.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.port = (server.address() as AddressInfo).port;
  state.close = () => new Promise<void>((resolve) => server.close(() => resolve()));
  return state;
}
