import { ServerInterceptingCall, type Metadata, type ServerInterceptor } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import type { Principal } from '../../core/domain/index.ts';
import { SvcError, type DocumentationBase } from '../../core/errors/index.ts';
import type { Authenticator } from '../auth/authenticator.ts';
import type { RequestRate } from '../auth/request-rate.ts';
import { requestIdOf } from '../observability/request-id.ts';
import { firstValue, peerAddress } from './call-metadata.ts';
import { arrivingStreamOf, lengthPrefixes } from './arriving-messages.ts';
import { failedCall } from './call-outcome.ts';
import type { RequestBytes } from './request-bytes.ts';

/** Who a call's metadata was admitted as, under which request id. */
export interface Admission {
  principal: Principal;
  requestId: string;
}

export interface CallGate {
  interceptor: ServerInterceptor;
  /** The admission of a call whose metadata the interceptor let through. */
  admissionOf(metadata: Metadata): Admission | undefined;
}

export interface CallGateOptions {
  authenticator: Authenticator;
  /** Shared with REST: a caller has one limit whichever way it calls. */
  requestRate: RequestRate;
  logger: Logger;
  documentationBase: DocumentationBase;
  /** How long a call may take to be admitted and to send its whole request message. */
  receiveTimeoutMs: number;
  /** Sizes each message of the contracts' services as it arrives, and decodes it once whole. */
  requestBytes: RequestBytes;
  /**
   * Sizes each message of health and reflection as it arrives: their own budget, since they take
   * calls without a credential, of which one address may hold only a share.
   */
  openRequestBytes: RequestBytes;
}

/**
 * A server interceptor that authenticates a call of the contracts' services (`/svc.…`) from its
 * metadata and takes its request-rate token before a byte of its message is read: grpc-js reads
 * and deserialises the message only once the metadata is passed on, so a caller without a valid
 * credential, or over its rate, costs no decompression or decoding. Health and reflection are
 * not authenticated. Every call's messages are then counted from their length prefixes as they
 * arrive, before grpc-js buffers them whole (request-bytes.ts): one past the method's limit or
 * the server's budget is refused at its prefix. A call that is not admitted and sent whole
 * within `receiveTimeoutMs`, or whose later message is not whole within it of its first byte,
 * is ended with SVC-SYS-9010, so a message left half-sent does not hold its bytes. A request of
 * the contracts' services is then decoded and holds its bytes until the call ends; that of
 * health or reflection gives them back once its handler has it.
 */
export function authenticateFirst(options: CallGateOptions): CallGate {
  const admitted = new WeakMap<Metadata, Admission>();
  const interceptor: ServerInterceptor = (method, call) => {
    const gated = method.path.startsWith('/svc.');
    const address = peerAddress(call.getPeer());
    const bytes = (gated ? options.requestBytes : options.openRequestBytes).open(method.path, address);
    const stream = arrivingStreamOf(call);
    const start = Date.now();
    let ended = false;
    // From the metadata until the first message is handed on, admission included.
    let firstMessage: NodeJS.Timeout | undefined;
    // From a message's first byte to its last, for every message of the call.
    let onTheWire: NodeJS.Timeout | undefined;
    let requestId = '';
    let principalId: string | undefined;
    const finish = (): void => {
      ended = true;
      clearTimeout(firstMessage);
      clearTimeout(onTheWire);
      stream?.off('data', readPrefixes);
      bytes.release();
    };
    const refuse = (error: unknown): void => {
      if (ended) return;
      finish();
      const line = { request_id: requestId, rpc: method.path, ms: Date.now() - start, principal: principalId };
      call.sendStatus(failedCall(error, line, options.logger, options.documentationBase()));
    };
    const receiveDeadline = (what: string): NodeJS.Timeout =>
      setTimeout(
        () =>
          refuse(new SvcError('SVC-SYS-9010', `${what} not received within ${String(options.receiveTimeoutMs)} ms`)),
        options.receiveTimeoutMs,
      );
    // Ahead of grpc-js's own listener: a message refused at its prefix is never buffered.
    const readPrefixes = lengthPrefixes({
      begun: () => {
        if (!ended) onTheWire = receiveDeadline('request message');
      },
      declared: (declared) => {
        try {
          bytes.arriving(declared);
        } catch (error) {
          refuse(error);
        }
      },
      ended: () => clearTimeout(onTheWire),
    });
    stream?.prependListener('data', readPrefixes);
    const admit = (metadata: Metadata, passOn: (metadata: Metadata) => void): void => {
      options.authenticator
        .authenticate(
          { authorization: firstValue(metadata, 'authorization'), 'x-api-key': firstValue(metadata, 'x-api-key') },
          address,
        )
        .then(async (principal) => {
          principalId = principal.id;
          await options.requestRate.take(principal);
          if (ended) return;
          admitted.set(metadata, { principal, requestId });
          passOn(metadata);
        })
        .catch(refuse);
    };
    return new ServerInterceptingCall(call, {
      start: (next) => {
        next({
          onReceiveMetadata: (metadata, passOn) => {
            requestId = requestIdOf(firstValue(metadata, 'x-request-id'));
            firstMessage = receiveDeadline('request');
            if (stream === undefined)
              refuse(new Error('the call’s HTTP/2 stream is out of reach: @grpc/grpc-js changed'));
            else if (gated) admit(metadata, passOn);
            else passOn(metadata);
          },
          onReceiveMessage: (message, passOn) => {
            clearTimeout(firstMessage);
            if (ended) return;
            if (!gated) {
              bytes.delivered();
              passOn(message);
              return;
            }
            let request;
            try {
              request = bytes.admit(message);
            } catch (error) {
              refuse(error);
              return;
            }
            passOn(request);
          },
          onCancel: finish,
        });
      },
      sendStatus: (status, next) => {
        finish();
        next(status);
      },
    });
  };
  return { interceptor, admissionOf: (metadata) => admitted.get(metadata) };
}
