import type { Metadata } from '@grpc/grpc-js';

/** The first value of a metadata key, when it is text. */
export function firstValue(metadata: Metadata, key: string): string | undefined {
  const [value] = metadata.get(key);
  return typeof value === 'string' ? value : undefined;
}

/**
 * The client's address of a call: grpc-js gives the peer as `<remote address>:<remote port>`
 * (IPv6 unbracketed, `::1:5000`), so the port is what follows the last colon.
 */
export function peerAddress(peer: string): string {
  return peer.replace(/:\d+$/, '');
}
