import { randomUUID } from 'node:crypto';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createServer } from '../listener/node-http.ts';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import { ERROR_DOCS_PREFIX, isSvcError, SvcError, type ErrorPages } from '../../core/errors/index.ts';
import { errorBody } from '../listener/error-response.ts';
import { listenOn } from '../listener/listen-on.ts';

export interface Readiness {
  ready: boolean;
  /** Why the proxy is not ready, e.g. `ruleset not synced`; empty when ready. */
  reasons: string[];
}

/** The slice of a pino logger the admin server uses. */
export interface AdminLogger {
  error(fields: object, message: string): void;
}

export interface AdminServerOptions {
  registry: Registry;
  readiness: () => Readiness | Promise<Readiness>;
  /** The pages behind the `documentation_url` of the proxy's error bodies. */
  errorPages: ErrorPages;
  documentationBase: () => string;
  logger: AdminLogger;
  port?: number;
  host?: string;
  /**
   * Given (`SVC_METRICS_TOKEN_FILE`), `/metrics` is served only to a scrape bearing the metrics
   * token: its series name models, tokens and spend, per pod. The probes stay open.
   */
  metricsAccess?: (authorization: string | undefined) => boolean;
}

/**
 * The sidecar's admin port: Prometheus metrics, the liveness and readiness probes, and the error
 * code pages (`/docs/errors/{code}`), reachable from the agent's pod like the proxy itself.
 */
export class AdminServer {
  readonly server: Server;
  readonly #options: AdminServerOptions;

  constructor(options: AdminServerOptions) {
    this.#options = options;
    this.server = createServer((req, res) => {
      this.#serve(req, res).catch((error: unknown) => {
        options.logger.error({ err: error, url: req.url }, 'admin request failed');
        json(res, 500, { error: 'internal error' });
      });
    });
  }

  async listen(): Promise<AddressInfo> {
    const { port = 9464, host = '0.0.0.0' } = this.#options;
    return listenOn(this.server, port, host);
  }

  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeAllConnections();
    await closed;
  }

  async #serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    if (req.method !== 'GET' && req.method !== 'HEAD') return json(res, 405, { error: 'method not allowed' });
    if (path === '/metrics') {
      const refused = this.#metricsRefusal(req.headers.authorization);
      if (refused !== null)
        return json(res, refused.spec.http, errorBody(refused, randomUUID(), this.#options.documentationBase()));
      const { registry } = this.#options;
      const body = await registry.metrics();
      res.writeHead(200, { 'content-type': registry.contentType });
      res.end(body);
      return;
    }
    if (path === '/health/live') return json(res, 200, { status: 'live' });
    if (path === '/health/ready') {
      let readiness: Readiness;
      try {
        readiness = await this.#options.readiness();
      } catch (error) {
        this.#options.logger.error({ err: error }, 'readiness check failed');
        readiness = { ready: false, reasons: ['readiness check failed; see the proxy log'] };
      }
      return json(res, readiness.ready ? 200 : 503, {
        status: readiness.ready ? 'ready' : 'not_ready',
        reasons: readiness.reasons,
      });
    }
    if (path.startsWith(ERROR_DOCS_PREFIX)) return this.#errorPage(res, path.slice(ERROR_DOCS_PREFIX.length));
    json(res, 404, { error: 'not found' });
  }

  #metricsRefusal(authorization: string | undefined): SvcError | null {
    const access = this.#options.metricsAccess;
    if (access === undefined) return null;
    try {
      if (access(authorization)) return null;
    } catch (error) {
      if (!isSvcError(error)) throw error;
      return error;
    }
    return new SvcError(
      'SVC-SYS-9003',
      "the proxy's metrics need Authorization: Bearer with the token of SVC_METRICS_TOKEN_FILE",
    );
  }

  #errorPage(res: ServerResponse, code: string): void {
    const page = this.#options.errorPages.page(code);
    if (page === undefined) {
      const body = errorBody(
        new SvcError('SVC-SYS-9006', `no error code ${code}`, { code }),
        randomUUID(),
        this.#options.documentationBase(),
      );
      return json(res, 404, body);
    }
    res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(page) });
    res.end(page);
  }
}

function json(res: ServerResponse, status: number, body: unknown): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}
