import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import { listenOn } from '../listener/listen-on.ts';

export interface Readiness {
  ready: boolean;
  /** Why the proxy is not ready, e.g. `ruleset not synced`; empty when ready. */
  reasons: string[];
}

export interface AdminServerOptions {
  registry: Registry;
  readiness: () => Readiness | Promise<Readiness>;
  port?: number;
  host?: string;
}

/** The sidecar's admin port: Prometheus metrics and the liveness and readiness probes. */
export class AdminServer {
  readonly server: Server;
  readonly #options: AdminServerOptions;

  constructor(options: AdminServerOptions) {
    this.#options = options;
    this.server = createServer((req, res) => {
      this.#serve(req, res).catch((error: unknown) => json(res, 500, { error: (error as Error).message }));
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
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') return json(res, 405, { error: 'method not allowed' });
    if (path === '/metrics') {
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
        readiness = { ready: false, reasons: [`readiness check failed: ${(error as Error).message}`] };
      }
      return json(res, readiness.ready ? 200 : 503, {
        status: readiness.ready ? 'ready' : 'not_ready',
        reasons: readiness.reasons,
      });
    }
    json(res, 404, { error: `not found: ${path}` });
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
