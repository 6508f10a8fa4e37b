import { Metadata, type StatusObject } from '@grpc/grpc-js';
import { EnvelopeStatusSchema } from '../../core/domain/index.ts';
import { documentationUrl, isSvcError, SvcError } from '../../core/errors/index.ts';
import { storageUnavailable } from '../storage/unreachable.ts';
import { encodeStatusDetails } from './status-details.ts';

/**
 * Whatever a handler threw, as an SvcError: an unreachable store is UNAVAILABLE (SVC-SYS-9001),
 * anything else an internal error with no detail.
 */
export function asGrpcSvcError(error: unknown): SvcError {
  if (isSvcError(error)) return error;
  return storageUnavailable(error) ?? new SvcError('SVC-SYS-9007', 'internal error');
}

function metadataValue(value: unknown): string {
  return typeof value === 'string' ? value : JSON.stringify(value);
}

/**
 * The gRPC status of an SVC error (spec 7.3, through the one catalogue), with the
 * `google.rpc.Status` details in `grpc-status-details-bin`: an ErrorInfo whose reason is the SVC
 * code and whose metadata carries the error's details, request id and documentation URL; a
 * BadRequest with one field violation per refused field. The code also travels as `svc-code`.
 */
export function toGrpcStatus(error: SvcError, requestId: string, documentationBase: string): StatusObject {
  const code = error.spec.grpc;
  const info: Record<string, string> = {};
  for (const [key, value] of Object.entries(error.details)) {
    if (value !== undefined) info[key] = metadataValue(value);
  }
  // The envelope status of a refusal on an ended envelope, in this surface's words.
  if (EnvelopeStatusSchema.safeParse(error.details.state).success) info.state = `ENVELOPE_STATUS_${info.state}`;
  info.request_id = requestId;
  info.documentation_url = documentationUrl(documentationBase, error.code);
  const metadata = new Metadata();
  metadata.set('svc-code', error.code);
  metadata.set('x-request-id', requestId);
  metadata.set(
    'grpc-status-details-bin',
    encodeStatusDetails({
      code,
      message: error.message,
      reason: error.code,
      metadata: info,
      fieldViolations: error.fieldViolations,
    }),
  );
  return { code, details: `${error.code}: ${error.message}`, metadata };
}
