import { SvcError } from '../../../core/errors/index.ts';
import type { GrpcAccess, GrpcMethod } from '../server.ts';

/**
 * A method of the contract this version does not serve: authenticated and authorized like the
 * others, then refused with SVC-SYS-9011 (UNIMPLEMENTED), never answered with a made-up result.
 * The gateway gives it no HTTP route, so the OpenAPI document lists only what is served.
 */
export function notImplemented(method: string, access: GrpcAccess): GrpcMethod {
  return {
    access,
    unimplemented: true,
    handle: () => Promise.reject(new SvcError('SVC-SYS-9011', `${method} is not implemented yet`, { method })),
  };
}
