import { connect, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { isSvcError, SvcError } from '../../core/errors/index.ts';
import type { ProxyNetMetrics } from '../admin/index.ts';
import type { EgressGuard } from '../egress/index.ts';
import type { ConnectTarget } from './connect-target.ts';
import { rawErrorResponse } from './error-response.ts';

export const CONNECT_ESTABLISHED = 'HTTP/1.1 200 Connection Established\r\n\r\n';

export interface BlindTunnelOptions {
  guard: EgressGuard;
  /** Base of the `documentation_url` in refusals written on the socket. */
  documentationBase: string;
  metrics: ProxyNetMetrics | undefined;
  connectTimeoutMs: number;
}

/**
 * Relays bytes untouched between the client and `target`, dialled through the egress guard (a
 * refused address answers 403 SVC-ADP-5003). Either side closing or failing destroys the other,
 * so no half-dead socket is left behind.
 */
export function openBlindTunnel(
  client: Duplex,
  head: Buffer,
  target: ConnectTarget,
  requestId: string,
  options: BlindTunnelOptions,
): void {
  const { guard, metrics, connectTimeoutMs, documentationBase } = options;
  const refused = guard.checkLiteral(target.host);
  if (refused !== undefined) {
    client.end(rawErrorResponse(refused, requestId, documentationBase));
    return;
  }
  const upstream: Socket = connect({ host: target.host, port: target.port, lookup: guard.lookup });
  let established = false;
  const timer = setTimeout(
    () => upstream.destroy(new Error(`connect timeout after ${connectTimeoutMs} ms`)),
    connectTimeoutMs,
  );
  upstream.once('connect', () => {
    clearTimeout(timer);
    established = true;
    client.write(CONNECT_ESTABLISHED);
    if (metrics !== undefined) {
      // Counted as the bytes pass, so a long-lived tunnel shows its traffic before it closes.
      const toUpstream = metrics.tunnelBytes.labels({ direction: 'client_to_upstream' });
      const toClient = metrics.tunnelBytes.labels({ direction: 'upstream_to_client' });
      toUpstream.inc(head.length);
      client.on('data', (chunk: Buffer) => toUpstream.inc(chunk.length));
      upstream.on('data', (chunk: Buffer) => toClient.inc(chunk.length));
    }
    if (head.length > 0) upstream.write(head);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  upstream.on('error', (error: Error & { code?: string }) => {
    clearTimeout(timer);
    if (!established && client.writable) {
      const failure = isSvcError(error)
        ? error
        : new SvcError('SVC-ADP-5001', `cannot reach ${target.host}:${target.port}: ${error.code ?? error.message}`, {
            upstream: `${target.host}:${target.port}`,
          });
      client.end(rawErrorResponse(failure, requestId, documentationBase));
    } else {
      client.destroy();
    }
  });
  upstream.once('close', () => {
    clearTimeout(timer);
    client.destroy();
  });
  client.on('error', () => upstream.destroy());
  client.once('close', () => upstream.destroy());
}
