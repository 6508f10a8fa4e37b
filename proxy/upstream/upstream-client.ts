import type { IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import { Agent, buildConnector } from 'undici';
import { isSvcError, SvcError } from '../../core/errors/index.ts';
import type { ProxyNetMetrics } from '../admin/index.ts';
import { EgressGuard } from '../egress/index.ts';
import { clientResponseHeaders, upstreamRequestHeaders } from './header-filter.ts';
import { upstreamTarget, type UpstreamOverrides } from './overrides.ts';
import type { ProviderCredentials } from './provider-credentials.ts';

export interface UpstreamClientOptions {
  overrides?: UpstreamOverrides;
  /** PEM CAs for upstream TLS; when given they replace Node's default set (see upstreamTrust). */
  ca?: string[];
  metrics?: ProxyNetMetrics;
  /** Checks every address dialled (resolved once, the checked address connected); the built-in policy when absent. */
  guard?: EgressGuard;
  /** Provider keys set on requests to provider hosts, replacing the agent's. */
  credentials?: ProviderCredentials;
  /** Idle keep-alive connections per origin are kept this long. */
  keepAliveTimeoutMs?: number;
  connectTimeoutMs?: number;
  /** A model may think for minutes before the first byte, so these are generous. */
  headersTimeoutMs?: number;
  bodyTimeoutMs?: number;
}

export interface UpstreamRequest {
  /** The real upstream URL, before overrides. */
  url: URL;
  method: string;
  /** The client's headers; hop-by-hop and `x-svc-*` fields are removed here, credentials replaced when held. */
  headers: IncomingHttpHeaders;
  /** A stream is relayed as it arrives; a buffer or string is sent whole. */
  body?: Readable | Buffer | string | null;
  signal?: AbortSignal;
  /** Metric label for upstream latency: a provider name from a small fixed set. */
  provider?: string;
  /** `process.hrtime.bigint()` when the proxy received the request, for the added-latency metric. */
  receivedAt?: bigint;
}

export interface UpstreamResponse {
  statusCode: number;
  /** Response headers with hop-by-hop fields removed. */
  headers: Record<string, string | string[]>;
  /** The body as it arrives, chunk by chunk; consume it or destroy it. */
  body: Readable;
}

const NS_PER_S = 1e9;

/** Sends requests upstream over keep-alive connection pools, one per origin. */
export class UpstreamClient {
  readonly #agent: Agent;
  readonly #overrides: UpstreamOverrides;
  readonly #metrics: ProxyNetMetrics | undefined;
  readonly #credentials: ProviderCredentials | undefined;

  constructor(options: UpstreamClientOptions = {}) {
    this.#overrides = options.overrides ?? new Map();
    this.#metrics = options.metrics;
    this.#credentials = options.credentials;
    const guard =
      options.guard ?? new EgressGuard({ onRefused: () => options.metrics?.egressRefusals.inc({ reason: 'address' }) });
    // The guard's lookup resolves once and checks; the socket dials exactly what it returned.
    // An IP literal is never looked up, so it is checked here before the connector runs.
    const connector = buildConnector({
      timeout: options.connectTimeoutMs ?? 10_000,
      allowH2: false,
      lookup: guard.lookup,
      ...(options.ca === undefined ? {} : { ca: options.ca }),
    });
    this.#agent = new Agent({
      keepAliveTimeout: options.keepAliveTimeoutMs ?? 30_000,
      headersTimeout: options.headersTimeoutMs ?? 600_000,
      bodyTimeout: options.bodyTimeoutMs ?? 300_000,
      connect: (connectOptions, callback) => {
        const refused = guard.checkLiteral(connectOptions.hostname);
        if (refused !== undefined) callback(refused, null);
        else connector(connectOptions, callback);
      },
    });
  }

  async request(req: UpstreamRequest): Promise<UpstreamResponse> {
    const streamed =
      req.body !== undefined && req.body !== null && typeof req.body !== 'string' && !Buffer.isBuffer(req.body);
    const headers = upstreamRequestHeaders(req.headers, streamed);
    let target = upstreamTarget(req.url, this.#overrides);
    if (this.#credentials !== undefined) {
      // TLS, or a destination the operator configured (an override): only then may a key travel.
      const secure = req.url.protocol === 'https:' || target.overridden;
      const url = this.#credentials.apply(req.url, headers, secure);
      if (url !== req.url) target = upstreamTarget(url, this.#overrides);
    }
    const sentAt = process.hrtime.bigint();
    if (req.receivedAt !== undefined) this.#metrics?.addedLatency.observe(Number(sentAt - req.receivedAt) / NS_PER_S);
    try {
      const res = await this.#agent.request({
        origin: target.origin,
        path: target.path,
        method: req.method,
        headers,
        body: req.body ?? null,
        signal: req.signal,
      });
      this.#metrics?.upstreamLatency.observe(
        { provider: req.provider ?? 'unknown' },
        Number(process.hrtime.bigint() - sentAt) / NS_PER_S,
      );
      return { statusCode: res.statusCode, headers: clientResponseHeaders(res.headers), body: res.body };
    } catch (error) {
      // An egress refusal of the dialled address keeps its own code (403 SVC-ADP-5003).
      if (isSvcError(error)) throw error;
      const cause = error as Error & { code?: string };
      throw new SvcError(
        'SVC-ADP-5001',
        `upstream ${target.origin} unreachable: ${cause.code ?? cause.name}: ${cause.message}`,
        {
          upstream: target.origin,
          cause: cause.code ?? cause.name,
        },
      );
    }
  }

  async close(): Promise<void> {
    await this.#agent.close();
  }
}
