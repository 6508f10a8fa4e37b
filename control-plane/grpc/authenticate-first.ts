import { ServerInterceptingCall, type Metadata, type ServerInterceptor } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import type { Principal } from '../../core/domain/index.ts';
import { SvcError, type DocumentationBase } from '../../core/errors/index.ts';
import type { Authenticator } from '../auth/authenticator.ts';
import type { RequestRate } from '../auth/request-rate.ts';
import { requestIdOf } from '../observability/request-id.ts';
import { firstValue, peerAddress } from './call-metadata.ts';
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
  /** Sizes and decodes each request message admitted (the services' are left undecoded). */
  requestBytes: RequestBytes;
}

/**
 * A server interceptor that authenticates a call of the contracts' services (`/svc.…`) from its
 * metadata and takes its request-rate token before a byte of its message is read: grpc-js reads
 * and deserialises the message only once the metadata is passed on, so a caller without a valid
 * credential, or over its rate, costs no decompression or decoding. A call that is not admitted
 * and sent whole within `receiveTimeoutMs` is ended with SVC-SYS-9010, so a message left
 * half-sent does not hold its buffer. Its message is then sized against the method's limit and
 * the server's budget before it is decoded, and holds its bytes of that budget until the call
 * ends (request-bytes.ts). Health and reflection pass untouched.
 */
export function authenticateFirst(options: CallGateOptions): CallGate {
  const admitted = new WeakMap<Metadata, Admission>();
  const interceptor: ServerInterceptor = (method, call) => {
    if (!method.path.startsWith('/svc.')) return new ServerInterceptingCall(call);
    const start = Date.now();
    let ended = false;
    let timer: NodeJS.Timeout | undefined;
    let requestId = '';
    let principalId: string | undefined;
    let release = (): void => undefined;
    const refuse = (error: unknown): void => {
      if (ended) return;
      ended = true;
      clearTimeout(timer);
      const line = { request_id: requestId, rpc: method.path, ms: Date.now() - start, principal: principalId };
      call.sendStatus(failedCall(error, line, options.logger, options.documentationBase()));
    };
    return new ServerInterceptingCall(call, {
      start: (next) => {
        next({
          onReceiveMetadata: (metadata, passOn) => {
            requestId = requestIdOf(firstValue(metadata, 'x-request-id'));
            timer = setTimeout(
              () =>
                refuse(
                  new SvcError('SVC-SYS-9010', `request not received within ${String(options.receiveTimeoutMs)} ms`),
                ),
              options.receiveTimeoutMs,
            );
            const credentials = {
              authorization: firstValue(metadata, 'authorization'),
              'x-api-key': firstValue(metadata, 'x-api-key'),
            };
            options.authenticator
              .authenticate(credentials, peerAddress(call.getPeer()))
              .then(async (principal) => {
                principalId = principal.id;
                await options.requestRate.take(principal);
                if (ended) return;
                admitted.set(metadata, { principal, requestId });
                passOn(metadata);
              })
              .catch(refuse);
          },
          onReceiveMessage: (message, passOn) => {
            clearTimeout(timer);
            if (ended) return;
            let accepted;
            try {
              accepted = options.requestBytes.admit(method.path, message);
            } catch (error) {
              refuse(error);
              return;
            }
            release = accepted.release;
            passOn(accepted.request);
          },
          onCancel: () => {
            ended = true;
            clearTimeout(timer);
            release();
          },
        });
      },
      sendStatus: (status, next) => {
        release();
        next(status);
      },
    });
  };
  return { interceptor, admissionOf: (metadata) => admitted.get(metadata) };
}
