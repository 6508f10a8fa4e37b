import type { ServiceDefinition } from '@grpc/grpc-js';
import { MAX_JSON_VALUES } from '../../core/domain/index.ts';
import { SvcError } from '../../core/errors/index.ts';
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
 * size is admitted (`RequestBytes.admit`), so an oversized message costs no protobuf decoding and
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

/** A decoded request, and the bytes it holds of the server's budget until the call ends. */
export interface AdmittedRequest {
  request: unknown;
  /** Gives its bytes back; once is enough, more are ignored. */
  release: () => void;
}

export interface RequestBytes {
  /**
   * Decodes one request message of the method at `path`, or refuses it: above the method's limit
   * (SVC-SYS-9009), while the requests received and not yet answered hold the server's whole
   * budget (SVC-SYS-9005), or not decodable, such as nested past the decoder's depth limit
   * (SVC-SYS-9002).
   */
  admit(path: string, message: unknown): AdmittedRequest;
}

export interface RequestBytesOptions {
  /** Each method's largest request by path (`/svc.policy.v1.PolicyService/GetPolicy`). */
  limits: ReadonlyMap<string, number>;
  /** Bytes of the requests received and not yet answered, across every call of the process. */
  totalBytes: number;
}

// protobufjs's words for a message nested past Reader.recursionLimit.
const TOO_DEEP = /nesting depth|max depth/;

export function createRequestBytes(options: RequestBytesOptions): RequestBytes {
  let held = 0;
  return {
    admit(path, message) {
      if (!(message instanceof ReceivedMessage)) throw new Error(`request of ${path} was decoded before admission`);
      const bytes = message.bytes.length;
      const limit = options.limits.get(path) ?? SMALL_REQUEST_BYTES;
      if (bytes > limit) {
        throw new SvcError(
          'SVC-SYS-9009',
          `request message of ${String(bytes)} bytes; this method takes at most ${String(limit)}`,
          {
            limit_bytes: limit,
          },
        );
      }
      if (held + bytes > options.totalBytes) {
        throw new SvcError('SVC-SYS-9005', 'the server holds as many request bytes as it may; retry shortly', {
          limit_bytes: options.totalBytes,
        });
      }
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
      let request: unknown;
      try {
        request = message.decode(message.bytes);
      } catch (error) {
        const text = error instanceof Error ? error.message : String(error);
        throw new SvcError(
          'SVC-SYS-9002',
          TOO_DEEP.test(text)
            ? 'request message nested deeper than the protobuf decoder allows (100 levels, about 50 of JSON)'
            : 'request message is not valid protobuf of the method’s request type',
        );
      }
      held += bytes;
      let released = false;
      return {
        request,
        release: () => {
          if (released) return;
          released = true;
          held -= bytes;
        },
      };
    },
  };
}
