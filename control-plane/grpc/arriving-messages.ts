import type { ServerHttp2Stream } from 'node:http2';
import { Duplex } from 'node:stream';
import type { ServerInterceptingCallInterface } from '@grpc/grpc-js';

/** A gRPC message's prefix: a compressed flag, then its length as four big-endian bytes. */
const PREFIX_BYTES = 5;

/** What `lengthPrefixes` tells of each message as its bytes arrive. */
export interface MessageEdges {
  /** The first byte of its prefix has arrived. */
  begun(): void;
  /** Its prefix is whole: it declares `bytes`. */
  declared(bytes: number): void;
  /** Its last byte has arrived. */
  ended(): void;
}

/**
 * Reads the length prefixes of a stream's gRPC messages from its chunks as they arrive, and
 * tells `edges` when each message begins, what length it declares as soon as its prefix is
 * whole, and when its last byte is in. It keeps none of the messages' bytes: it only steps over
 * them to the next prefix.
 */
export function lengthPrefixes(edges: MessageEdges): (chunk: Buffer) => void {
  const prefix = Buffer.alloc(PREFIX_BYTES);
  let prefixRead = 0;
  let toSkip = 0;
  return (chunk) => {
    let at = 0;
    while (at < chunk.length) {
      if (toSkip > 0) {
        const skipped = Math.min(toSkip, chunk.length - at);
        toSkip -= skipped;
        at += skipped;
        if (toSkip === 0) edges.ended();
        continue;
      }
      if (prefixRead === 0) edges.begun();
      const read = chunk.copy(prefix, prefixRead, at, at + PREFIX_BYTES - prefixRead);
      prefixRead += read;
      at += read;
      if (prefixRead === PREFIX_BYTES) {
        prefixRead = 0;
        toSkip = prefix.readUInt32BE(1);
        edges.declared(toSkip);
        if (toSkip === 0) edges.ended();
      }
    }
  };
}

/**
 * The HTTP/2 stream a call's messages arrive on, or undefined if out of reach. grpc-js offers no
 * supported way to see a message before it has buffered all of it, so this reads the private
 * `stream` of its BaseServerInterceptingCall, which is what the first server interceptor is given
 * (grpc-js 1.14; credentials that add interceptors would come first and hide it). A grpc-js
 * that renames it leaves every call refused (authenticate-first.ts), not unbounded.
 */
export function arrivingStreamOf(call: ServerInterceptingCallInterface): ServerHttp2Stream | undefined {
  const stream = (call as unknown as { stream?: unknown }).stream;
  return stream instanceof Duplex && 'session' in stream ? (stream as ServerHttp2Stream) : undefined;
}
