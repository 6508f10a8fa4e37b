import type { StatusObject } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { asGrpcSvcError, toGrpcStatus } from './grpc-error.ts';

export interface CallLine {
  request_id: string;
  rpc: string;
  ms: number;
  principal: string | undefined;
}

/**
 * The status a failed call is answered with, its log line written: what the caller is not told
 * (an internal error) is logged in full under its request id.
 */
export function failedCall(error: unknown, line: CallLine, logger: Logger, documentationBase: string): StatusObject {
  const svc = asGrpcSvcError(error);
  if (svc.code === 'SVC-SYS-9007') logger.error({ ...line, code: svc.code, err: error }, 'rpc failed');
  else logger.info({ ...line, code: svc.code }, 'rpc');
  return toGrpcStatus(svc, line.request_id, documentationBase);
}
