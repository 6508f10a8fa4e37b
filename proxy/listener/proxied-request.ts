import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';

/** How a request reached the proxy. */
export type ListenerMode = 'forward' | 'intercept' | 'reverse';

/** One agent request, whichever way it arrived, as the governance pipeline sees it. */
export interface ProxiedRequest {
  /** The client's `x-request-id`, or one generated here. */
  id: string;
  mode: ListenerMode;
  /** The real upstream URL, before upstream overrides. */
  targetUrl: URL;
  /** For reverse mode, the route name (`openai` for `/openai/...`); otherwise undefined. */
  route: string | undefined;
  method: string;
  /** The client's headers as received, `x-svc-*` governance fields included. */
  headers: IncomingHttpHeaders;
  /** The request body as it arrives; empty when `hasBody` is false. */
  body: Readable;
  hasBody: boolean;
  clientReq: IncomingMessage;
  clientRes: ServerResponse;
  /** Aborted when the client goes away before its response is complete. */
  signal: AbortSignal;
  /** `process.hrtime.bigint()` at arrival. */
  receivedAt: bigint;
}

/** Serves one request; a rejection fails that request only. */
export type ProxyHandler = (req: ProxiedRequest) => Promise<void>;

export function requestHasBody(headers: IncomingHttpHeaders): boolean {
  const length = headers['content-length'];
  return headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}
