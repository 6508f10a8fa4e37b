import { randomUUID } from 'node:crypto';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createServer } from './node-http.ts';
import { Socket, type AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { TLSSocket } from 'node:tls';
import { SvcError } from '../../core/errors/index.ts';
import type { ConnectionMode, EgressRefusalReason, ProxyNetMetrics } from '../admin/index.ts';
import { EgressGuard, type EgressDecision } from '../egress/index.ts';
import type { LeafCertificateCache } from '../tls/index.ts';
import { CONNECT_ESTABLISHED, openBlindTunnel } from './blind-tunnel.ts';
import { canonicalHostname, interceptedOrigin, parseConnectTarget, type ConnectTarget } from './connect-target.ts';
import { asSvcError, rawErrorResponse, sendError } from './error-response.ts';
import { requestHasBody, type ProxiedRequest, type ProxyHandler } from './proxied-request.ts';
import { compileReverseRoutes, type ReverseRouter, type ReverseRoutes } from './reverse-routes.ts';
import { listenOn } from './listen-on.ts';
import { readFirstBytes } from './first-bytes.ts';
import { closeWhenIdle } from './idle-close.ts';

/** The first byte of a TLS handshake record; anything else inside an intercepted CONNECT is plain HTTP. */
const TLS_HANDSHAKE = 0x16;

type RoutedTarget = Pick<ProxiedRequest, 'mode' | 'targetUrl' | 'route'>;

/** The slice of a pino logger the listener uses. */
export interface ListenerLogger {
  warn(fields: object, message: string): void;
  debug(fields: object, message: string): void;
}

export interface ProxyListenerOptions {
  handler: ProxyHandler;
  /** Destinations (`host`, `port`) whose CONNECT tunnels are governed; all others are tunnelled blind. */
  interceptHost: (host: string, port: number) => boolean;
  /**
   * Hosts governed on some port. On a port `interceptHost` does not name, a CONNECT or forward
   * request to one is refused: a blind tunnel or a relay there could carry governed traffic.
   */
  governedHost?: (host: string) => boolean;
  /** Egress rules for CONNECT and forward requests, on the name; must answer fast. Allows everything when absent. */
  egressCheck?: (host: string, port: number) => EgressDecision | Promise<EgressDecision>;
  /** Checks the address a blind tunnel dials; the built-in address policy when absent. */
  egressGuard?: EgressGuard;
  leafCertificates: LeafCertificateCache;
  reverseRoutes?: ReverseRoutes;
  metrics?: ProxyNetMetrics;
  logger?: ListenerLogger;
  /** Base of the `documentation_url` in error bodies (the admin port serves the pages). */
  documentationBase: () => string;
  port?: number;
  host?: string;
  /** How long a blind tunnel's connection to its destination may take. */
  tunnelConnectTimeoutMs?: number;
  /** How long an intercepted CONNECT may stay silent before its first bytes tell TLS from plain HTTP. */
  firstBytesTimeoutMs?: number;
  /** How long the client's TLS handshake inside an intercepted CONNECT may take once it began. */
  tunnelHandshakeTimeoutMs?: number;
  /** How long a CONNECT tunnel (blind or intercepted) stays open with no byte either way. */
  tunnelIdleTimeoutMs?: number;
  /**
   * How long an idle client connection stays open. Longer than Node's 5 s default, so that an
   * agent's pooled connection is not closed under a request it is just sending.
   */
  keepAliveTimeoutMs?: number;
  /**
   * Told of each request it serves (intercepted or not) until its response has closed and its
   * handler has finished, whichever is later: the rest of an answer read after its client left,
   * to bill it, is still the request's work.
   */
  activity?: { begin(): () => void };
}

/**
 * The proxy's traffic port: absolute-URI forward requests, CONNECT (intercepted or blind) and
 * reverse-mode paths, all normalised into ProxiedRequest and given to one handler.
 */
export class ProxyListener {
  readonly server: Server;
  /** Serves the decrypted side of intercepted CONNECT tunnels; it never listens itself. */
  readonly #interceptServer: Server;
  readonly #interceptTargets = new WeakMap<Duplex, InterceptTarget>();
  readonly #tunnels = new Set<Duplex>();
  readonly #options: ProxyListenerOptions;
  readonly #reverse: ReverseRouter;
  readonly #guard: EgressGuard;

  constructor(options: ProxyListenerOptions) {
    this.#options = options;
    this.#guard = options.egressGuard ?? new EgressGuard({ onRefused: () => this.#refused('address') });
    this.#reverse = compileReverseRoutes(options.reverseRoutes ?? {});
    this.server = createServer((req, res) => this.#onRequest(req, res, false));
    this.#interceptServer = createServer((req, res) => this.#onRequest(req, res, true));
    // An expectation other than 100-continue is served like any request (Expect never crosses to
    // the upstream): Node would answer it with a bare 417 that carries no SVC code.
    this.server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => this.#onRequest(req, res, false));
    this.#interceptServer.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) =>
      this.#onRequest(req, res, true),
    );
    this.server.on('connect', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      void this.#onConnect(req, socket, head);
    });
    for (const server of [this.server, this.#interceptServer]) {
      server.keepAliveTimeout = options.keepAliveTimeoutMs ?? 65_000;
      server.on('clientError', (error: Error & { code?: string }, socket: Duplex) =>
        this.#onClientError(error, socket),
      );
    }
  }

  async listen(): Promise<AddressInfo> {
    const { port = 3128, host = '127.0.0.1' } = this.#options;
    return listenOn(this.server, port, host);
  }

  async close(): Promise<void> {
    // Tunnels include intercepted CONNECT sockets, which the intercept server does not track.
    for (const socket of this.#tunnels) socket.destroy();
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeAllConnections();
    await closed;
  }

  /** A request the HTTP parser rejects gets a 400 naming SVC-SYS-9002, then the connection closes. */
  #onClientError(error: Error & { code?: string }, socket: Duplex): void {
    if (!socket.writable || error.code === 'ECONNRESET') {
      socket.destroy();
      return;
    }
    const failure = new SvcError(
      'SVC-SYS-9002',
      `malformed HTTP request: ${error.code ?? error.message}`,
      { fields: 'request' },
      [{ field: 'request', description: error.message }],
    );
    socket.end(rawErrorResponse(failure, randomUUID(), this.#options.documentationBase()));
  }

  #count(mode: ConnectionMode): void {
    this.#options.metrics?.connections.inc({ mode });
  }

  #refused(reason: EgressRefusalReason): void {
    this.#options.metrics?.egressRefusals.inc({ reason });
  }

  /** The egress refusal for `host:port`, counted, or undefined when it may be reached. */
  async #egressRefusal(host: string, port: number): Promise<SvcError | undefined> {
    const check = this.#options.egressCheck;
    if (check === undefined) return undefined;
    let decision: EgressDecision;
    try {
      decision = await check(host, port);
    } catch (error) {
      // An egress check that cannot decide refuses: egress control fails closed.
      this.#options.logger?.warn({ host, port, err: error }, 'egress check failed; refusing');
      decision = 'deny';
    }
    if (decision === 'allow') return undefined;
    this.#count('refused');
    this.#refused(decision === 'deny_port' ? 'port' : 'policy');
    return decision === 'deny_port'
      ? new SvcError(
          'SVC-ADP-5003',
          `egress to ${host}:${port} refused: port ${port} is not an allowed egress port (SVC_PROXY_EGRESS_PORTS) and no network:connect policy allows it`,
          { host, port, reason: 'port' },
        )
      : new SvcError('SVC-ADP-5003', `egress to ${host}:${port} denied by policy`, { host, port, reason: 'policy' });
  }

  /** The refusal for a port of a governed host that is not governed itself, counted. */
  #ungovernedPort(host: string, port: number): SvcError | undefined {
    if (this.#options.governedHost?.(host) !== true || this.#options.interceptHost(host, port)) return undefined;
    this.#count('refused');
    this.#refused('port');
    return new SvcError(
      'SVC-ADP-5003',
      `egress to ${host}:${port} refused: ${host} is governed on other ports only, and this one would carry its traffic ungoverned`,
      { host, port, reason: 'port' },
    );
  }

  #onRequest(clientReq: IncomingMessage, clientRes: ServerResponse, intercepted: boolean): void {
    const receivedAt = process.hrtime.bigint();
    const id = headerValue(clientReq.headers['x-request-id']) ?? randomUUID();
    const abort = new AbortController();
    const ended = this.#options.activity?.begin();
    let unsettled = 2;
    const settled = () => {
      if (--unsettled === 0) ended?.();
    };
    clientRes.once('close', () => {
      settled();
      if (!clientRes.writableFinished) abort.abort();
    });
    void this.#serve(clientReq, clientRes, intercepted, id, receivedAt, abort.signal)
      .catch((error: unknown) => {
        const failure = asSvcError(error);
        // A client that hung up mid-answer is routine; anything else is worth a warning.
        const fields = {
          request_id: id,
          method: clientReq.method,
          url: clientReq.url,
          // Credential headers are redacted by the logger's scrubber, like every field of every line.
          headers: clientReq.headers,
          code: failure.code,
          err: error,
        };
        if (abort.signal.aborted) this.#options.logger?.debug(fields, 'client left before its answer was complete');
        else this.#options.logger?.warn(fields, 'proxied request failed');
        sendError(clientRes, failure, id, this.#options.documentationBase());
      })
      .finally(settled);
  }

  async #serve(
    clientReq: IncomingMessage,
    clientRes: ServerResponse,
    intercepted: boolean,
    id: string,
    receivedAt: bigint,
    signal: AbortSignal,
  ): Promise<void> {
    const { mode, targetUrl, route } = intercepted
      ? this.#interceptedTarget(clientReq)
      : await this.#plainTarget(clientReq.url ?? '/');
    await this.#options.handler({
      id,
      mode,
      targetUrl,
      route,
      method: clientReq.method ?? 'GET',
      headers: clientReq.headers,
      body: clientReq,
      hasBody: requestHasBody(clientReq.headers),
      clientReq,
      clientRes,
      signal,
      receivedAt,
    });
  }

  #interceptedTarget(clientReq: IncomingMessage): RoutedTarget {
    const target = this.#interceptTargets.get(clientReq.socket);
    if (target === undefined) throw new SvcError('SVC-SYS-9007', 'intercepted request without its CONNECT target');
    return {
      mode: 'intercept',
      targetUrl: new URL(interceptedOrigin(target, target.tls) + originForm(clientReq.url ?? '/')),
      route: undefined,
    };
  }

  /** A request on the listening port itself: a reverse-mode path or a forward-proxy absolute URI. */
  async #plainTarget(rawUrl: string): Promise<RoutedTarget> {
    if (rawUrl.startsWith('/')) {
      const reverse = this.#reverse(rawUrl);
      if (reverse === undefined)
        throw new SvcError('SVC-SYS-9006', `no upstream route for path ${rawUrl.split('?')[0] ?? rawUrl}`, {
          path: rawUrl,
        });
      this.#count('reverse');
      return { mode: 'reverse', targetUrl: reverse.url, route: reverse.route };
    }
    const absolute = URL.parse(rawUrl);
    const hostname = canonicalHostname(absolute?.hostname ?? '');
    if (absolute === null || (absolute.protocol !== 'http:' && absolute.protocol !== 'https:') || hostname === '') {
      throw new SvcError('SVC-SYS-9002', `invalid request target: ${rawUrl}`, { fields: 'url' }, [
        { field: 'url', description: 'must be an absolute http(s) URL or a path' },
      ]);
    }
    if (hostname !== absolute.hostname) absolute.hostname = hostname;
    const host = hostname.startsWith('[') ? hostname.slice(1, -1) : hostname;
    const port = absolute.port === '' ? (absolute.protocol === 'https:' ? 443 : 80) : Number(absolute.port);
    const refusal = (await this.#egressRefusal(host, port)) ?? this.#ungovernedPort(host, port);
    if (refusal !== undefined) throw refusal;
    this.#count('forward');
    return { mode: 'forward', targetUrl: absolute, route: undefined };
  }

  async #onConnect(req: IncomingMessage, client: Duplex, head: Buffer): Promise<void> {
    this.#tunnels.add(client);
    client.once('close', () => this.#tunnels.delete(client));
    client.on('error', (error) => this.#options.logger?.debug({ err: error.message }, 'client socket error'));
    const requestId = headerValue(req.headers['x-request-id']) ?? randomUUID();
    // A held tunnel holds a socket and its buffers: one that carries nothing is let go.
    if (client instanceof Socket) {
      const idleMs = this.#options.tunnelIdleTimeoutMs ?? 900_000;
      closeWhenIdle(client, idleMs, () => {
        this.#options.logger?.debug({ request_id: requestId, target: req.url, idle_ms: idleMs }, 'idle tunnel closed');
        client.destroy();
      });
    }
    try {
      const target = parseConnectTarget(req.url);
      const refusal =
        (await this.#egressRefusal(target.host, target.port)) ?? this.#ungovernedPort(target.host, target.port);
      // The client may have given up while the egress check ran; open nothing for it then.
      if (client.destroyed) return;
      if (refusal !== undefined) {
        client.end(rawErrorResponse(refusal, requestId, this.#options.documentationBase()));
        return;
      }
      if (this.#options.interceptHost(target.host, target.port)) {
        await this.#intercept(client, head, target);
      } else {
        this.#count('tunnel');
        openBlindTunnel(client, head, target, requestId, {
          guard: this.#guard,
          documentationBase: this.#options.documentationBase(),
          metrics: this.#options.metrics,
          connectTimeoutMs: this.#options.tunnelConnectTimeoutMs ?? 10_000,
        });
      }
    } catch (error) {
      const failure = asSvcError(error);
      this.#options.logger?.warn(
        { request_id: requestId, target: req.url, code: failure.code, err: error },
        'CONNECT failed',
      );
      if (client.writable) client.end(rawErrorResponse(failure, requestId, this.#options.documentationBase()));
      else client.destroy();
    }
  }

  /**
   * Serves an intercepted CONNECT: a TLS ClientHello is answered with a leaf for the target and
   * the decrypted requests are served; any other first byte is plain HTTP (what Node's fetch
   * sends for an `http://` URL through HTTP_PROXY) and is served as it is, through the same
   * handler. Either way nothing inside the tunnel reaches the upstream ungoverned.
   */
  async #intercept(client: Duplex, head: Buffer, target: ConnectTarget): Promise<void> {
    this.#count('intercept');
    client.write(CONNECT_ESTABLISHED);
    const first = head.length > 0 ? head : await readFirstBytes(client, this.#options.firstBytesTimeoutMs ?? 10_000);
    if (first === undefined) {
      client.destroy();
      return;
    }
    client.unshift(first);
    if (first[0] !== TLS_HANDSHAKE) {
      this.#interceptTargets.set(client, { ...target, tls: false });
      this.#interceptServer.emit('connection', client);
      client.resume();
      return;
    }
    const handshakeMs = this.#options.tunnelHandshakeTimeoutMs ?? 10_000;
    const handshake = setTimeout(() => {
      this.#options.logger?.debug({ host: target.host, timeout_ms: handshakeMs }, 'TLS handshake timed out');
      client.destroy();
    }, handshakeMs);
    client.once('close', () => clearTimeout(handshake));
    const secureContext = await this.#options.leafCertificates.secureContextFor(target.host);
    if (client.destroyed) return;
    const tls = new TLSSocket(client, { isServer: true, secureContext, ALPNProtocols: ['http/1.1'] });
    tls.once('secure', () => clearTimeout(handshake));
    tls.on('error', (error: Error) => {
      this.#options.logger?.debug({ host: target.host, err: error.message }, 'intercepted TLS error');
      client.destroy();
    });
    this.#interceptTargets.set(tls, { ...target, tls: true });
    this.#interceptServer.emit('connection', tls);
  }
}

interface InterceptTarget extends ConnectTarget {
  /** False when the client spoke plain HTTP inside the tunnel. */
  tls: boolean;
}

/**
 * The path and query of a request target. Joined to an origin by concatenation, never resolved
 * against it: resolving would let a path such as `//elsewhere.test/x` change the host.
 */
function originForm(rawUrl: string): string {
  if (rawUrl.startsWith('/')) return rawUrl;
  const absolute = URL.parse(rawUrl);
  if (absolute === null) {
    throw new SvcError('SVC-SYS-9002', `invalid request target: ${rawUrl}`, { fields: 'url' }, [
      { field: 'url', description: 'must be a path or an absolute URL' },
    ]);
  }
  return `${absolute.pathname}${absolute.search}`;
}

function headerValue(value: string | string[] | undefined): string | undefined {
  const first = Array.isArray(value) ? value[0] : value;
  return first === undefined || first === '' ? undefined : first;
}
