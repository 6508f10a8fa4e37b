import type { ServiceDefinition } from '@grpc/grpc-js';
import { MAX_JSON_VALUES } from '../../core/domain/index.ts';
import { SvcError } from '../../core/errors/index.ts';
import { clientOf } from '../auth/auth-failure-limit.ts';
import { messagesIn, requestTypeOf } from './message-count.ts';

/**
 * Largest request of a method whose request carries no free-form data: ids, names, short texts
 * and lists of at most 100 of them fit many times over.
 */
export const SMALL_REQUEST_BYTES = 65_536;

/**
 * Messages one request may hold, nested ones included. A free-form JSON field at its bound of
 * MAX_JSON_VALUES values takes at most two apiece (the Value, and the Struct or ListValue of an
 * object or array); the rest of any request takes far fewer than the margin.
 */
export const MAX_REQUEST_MESSAGES = 2 * MAX_JSON_VALUES + 10_000;

/**
 * A request message as grpc-js received it, not yet decoded: the call gate decodes it once its
 * size is admitted (`CallBytes.admit`), so an oversized message costs no protobuf decoding and
 * a decoding failure is answered as an SVC error rather than grpc-js's bare INTERNAL.
 */
export class ReceivedMessage {
  readonly bytes: Buffer;
  readonly decode: (bytes: Buffer) => unknown;
  constructor(bytes: Buffer, decode: (bytes: Buffer) => unknown) {
    this.bytes = bytes;
    this.decode = decode;
  }
}

/** The service with each method's request left undecoded, as a ReceivedMessage. */
export function deferDecoding(service: ServiceDefinition): ServiceDefinition {
  return Object.fromEntries(
    Object.entries(service).map(([name, method]) => {
      const decode = method.requestDeserialize;
      return [name, { ...method, requestDeserialize: (bytes: Buffer) => new ReceivedMessage(bytes, decode) }];
    }),
  );
}

/**
 * What one call holds of the server's budget: each message from its length prefix on, as it
 * arrives (before grpc-js has buffered it), then the request admitted until the call ends.
 */
export interface CallBytes {
  /**
   * Counts a message of `declared` bytes as its prefix arrives, or refuses it: above the method's
   * limit (SVC-SYS-9009), or while the budget cannot take it (SVC-SYS-9005). One above the
   * server's largest message is left to grpc-js, which refuses it at the same prefix.
   */
  arriving(declared: number): void;
  /**
   * Decodes the message that arrived first, or refuses it: above the method's limit
   * (SVC-SYS-9009), past the budget once decompressed (SVC-SYS-9005), or not decodable, such as
   * nested past the decoder's depth limit (SVC-SYS-9002). Its bytes stay held until `release`.
   */
  admit(message: unknown): unknown;
  /** Gives back the bytes of the message that arrived first, which its handler has been given. */
  delivered(): void;
  /** Gives back all the call holds; once is enough, and later messages are not counted. */
  release(): void;
}

export interface RequestBytes {
  /**
   * What a call of the method at `path` (`/svc.policy.v1.PolicyService/GetPolicy`) holds, made
   * from `address` (its peer's, without the port).
   */
  open(path: string, address: string): CallBytes;
}

export interface RequestBytesOptions {
  /** Each method's largest request by path; any other takes SMALL_REQUEST_BYTES. */
  limits: ReadonlyMap<string, number>;
  /** Bytes of the requests arriving or received and not yet answered, across every call. */
  totalBytes: number;
  /** The server's largest message, which grpc-js refuses above. */
  maxMessageBytes: number;
  /**
   * Bytes the calls from one client may hold together (an IPv6 address counts by its /64, as the
   * failed-authentication limit counts it); unbounded but for `totalBytes` if absent.
   */
  perAddressBytes?: number;
}

// protobufjs's words for a message nested past Reader.recursionLimit.
const TOO_DEEP = /nesting depth|max depth/;

function tooLarge(bytes: number, limit: number): SvcError {
  return new SvcError(
    'SVC-SYS-9009',
    `request message of ${String(bytes)} bytes; this method takes at most ${String(limit)}`,
    { limit_bytes: limit },
  );
}

export function createRequestBytes(options: RequestBytesOptions): RequestBytes {
  let held = 0;
  // Only addresses holding bytes have an entry, so it is no larger than the calls open.
  const heldBy = new Map<string, number>();
  const perAddress = options.perAddressBytes ?? Infinity;
  return {
    open(path, peer) {
      const address = options.perAddressBytes === undefined ? peer : clientOf(peer);
      const limit = options.limits.get(path) ?? SMALL_REQUEST_BYTES;
      // The declared bytes of each message arrived and not yet admitted or delivered, in order.
      const arrived: number[] = [];
      let holding = 0;
      let released = false;
      const hold = (bytes: number): void => {
        if (held + bytes > options.totalBytes) {
          throw new SvcError('SVC-SYS-9005', 'the server holds as many request bytes as it may; retry shortly', {
            limit_bytes: options.totalBytes,
          });
        }
        const byAddress = heldBy.get(address) ?? 0;
        if (byAddress + bytes > perAddress) {
          throw new SvcError(
            'SVC-SYS-9005',
            'calls from this address hold as many request bytes as they may; retry shortly',
            {
              limit_bytes: perAddress,
            },
          );
        }
        held += bytes;
        heldBy.set(address, byAddress + bytes);
        holding += bytes;
      };
      const giveBack = (bytes: number): void => {
        held -= bytes;
        holding -= bytes;
        const left = (heldBy.get(address) ?? 0) - bytes;
        if (left > 0) heldBy.set(address, left);
        else heldBy.delete(address);
      };
      return {
        arriving(declared) {
          if (released || declared > options.maxMessageBytes) return;
          if (declared > limit) throw tooLarge(declared, limit);
          hold(declared);
          arrived.push(declared);
        },
        admit(message) {
          if (!(message instanceof ReceivedMessage)) throw new Error(`request of ${path} was decoded before admission`);
          const bytes = message.bytes.length;
          if (bytes > limit) throw tooLarge(bytes, limit);
          // A compressed message declares fewer bytes than it holds once decompressed.
          const declared = arrived.shift() ?? 0;
          if (bytes > declared) hold(bytes - declared);
          // Below SMALL_REQUEST_BYTES a message cannot hold enough of them to matter.
          if (bytes > SMALL_REQUEST_BYTES) {
            const type = requestTypeOf(path);
            if (type !== undefined && messagesIn(type, message.bytes, MAX_REQUEST_MESSAGES) > MAX_REQUEST_MESSAGES) {
              throw new SvcError(
                'SVC-SYS-9009',
                `request message holds more than ${String(MAX_REQUEST_MESSAGES)} messages (values of free-form JSON among them)`,
                { limit_messages: MAX_REQUEST_MESSAGES },
              );
            }
          }
          try {
            return message.decode(message.bytes);
          } catch (error) {
            const text = error instanceof Error ? error.message : String(error);
            throw new SvcError(
              'SVC-SYS-9002',
              TOO_DEEP.test(text)
                ? 'request message nested deeper than the protobuf decoder allows (100 levels, about 50 of JSON)'
                : 'request message is not valid protobuf of the method’s request type',
            );
          }
        },
        delivered() {
          if (released) return;
          giveBack(arrived.shift() ?? 0);
        },
        release() {
          if (released) return;
          released = true;
          giveBack(holding);
        },
      };
    },
  };
}
