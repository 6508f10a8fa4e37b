/**
 * The one table of SVC error codes. Every surface maps a code through this table, so
 * REST, gRPC, MCP and the proxy can never disagree about what a code means.
 * gRPC statuses are the numeric codes of spec 7.3; JSON-RPC codes are those of spec 7.4.
 */
export const GRPC = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  UNAUTHENTICATED: 16,
} as const;

const JSONRPC_INVALID_PARAMS = -32602;
const JSONRPC_INTERNAL = -32603;
const JSONRPC_APPLICATION = -32000;

export interface ErrorSpec {
  readonly http: number;
  readonly grpc: number;
  readonly jsonrpc: number;
  /** Recoverable errors may be retried with backoff; terminal ones must not be. */
  readonly retryable: boolean;
  readonly title: string;
}

function spec(http: number, grpc: number, jsonrpc: number, retryable: boolean, title: string): ErrorSpec {
  return { http, grpc, jsonrpc, retryable, title };
}

export const ERROR_CATALOGUE = {
  'SVC-ENV-1001': spec(404, GRPC.NOT_FOUND, JSONRPC_APPLICATION, false, 'envelope not found'),
  'SVC-ENV-1002': spec(409, GRPC.FAILED_PRECONDITION, JSONRPC_APPLICATION, false, 'illegal envelope status transition'),
  'SVC-ENV-1003': spec(409, GRPC.FAILED_PRECONDITION, JSONRPC_APPLICATION, false, 'envelope already terminated'),
  'SVC-ENV-1004': spec(
    409,
    GRPC.FAILED_PRECONDITION,
    JSONRPC_APPLICATION,
    false,
    'envelope already completed or failed',
  ),
  'SVC-ENV-1005': spec(422, GRPC.RESOURCE_EXHAUSTED, JSONRPC_APPLICATION, false, 'envelope limit exceeded'),

  'SVC-POL-2001': spec(403, GRPC.PERMISSION_DENIED, JSONRPC_APPLICATION, false, 'policy denied'),
  'SVC-POL-2002': spec(404, GRPC.NOT_FOUND, JSONRPC_APPLICATION, false, 'policy not found'),
  'SVC-POL-2003': spec(400, GRPC.INVALID_ARGUMENT, JSONRPC_INVALID_PARAMS, false, 'invalid policy'),
  'SVC-POL-2004': spec(403, GRPC.PERMISSION_DENIED, JSONRPC_APPLICATION, false, 'approval required'),
  'SVC-POL-2005': spec(404, GRPC.NOT_FOUND, JSONRPC_APPLICATION, false, 'approval not found'),
  'SVC-POL-2006': spec(409, GRPC.FAILED_PRECONDITION, JSONRPC_APPLICATION, false, 'approval already decided'),

  'SVC-BUD-3001': spec(422, GRPC.RESOURCE_EXHAUSTED, JSONRPC_APPLICATION, false, 'budget exhausted'),
  'SVC-BUD-3002': spec(404, GRPC.NOT_FOUND, JSONRPC_APPLICATION, false, 'budget not found'),
  'SVC-BUD-3003': spec(422, GRPC.FAILED_PRECONDITION, JSONRPC_APPLICATION, false, 'budget expired'),
  'SVC-BUD-3004': spec(422, GRPC.RESOURCE_EXHAUSTED, JSONRPC_APPLICATION, false, 'budget execution limit reached'),
  'SVC-BUD-3005': spec(422, GRPC.FAILED_PRECONDITION, JSONRPC_INVALID_PARAMS, false, 'budget invalid for this request'),
  'SVC-BUD-3006': spec(409, GRPC.FAILED_PRECONDITION, JSONRPC_APPLICATION, false, 'budget in use'),

  'SVC-EVT-4001': spec(503, GRPC.UNAVAILABLE, JSONRPC_APPLICATION, true, 'event delivery failed'),
  'SVC-EVT-4002': spec(400, GRPC.INVALID_ARGUMENT, JSONRPC_INVALID_PARAMS, false, 'invalid event'),

  'SVC-ADP-5001': spec(502, GRPC.UNAVAILABLE, JSONRPC_APPLICATION, true, 'upstream provider unreachable'),
  'SVC-ADP-5002': spec(504, GRPC.DEADLINE_EXCEEDED, JSONRPC_APPLICATION, true, 'checkpoint store timeout'),
  'SVC-ADP-5003': spec(403, GRPC.PERMISSION_DENIED, JSONRPC_APPLICATION, false, 'egress denied'),
  'SVC-ADP-5004': spec(422, GRPC.FAILED_PRECONDITION, JSONRPC_APPLICATION, false, 'model has no price'),
  'SVC-ADP-5005': spec(502, GRPC.RESOURCE_EXHAUSTED, JSONRPC_APPLICATION, false, 'provider answer too large'),
  'SVC-ADP-5006': spec(409, GRPC.ABORTED, JSONRPC_APPLICATION, false, 'execution context version conflict'),
  'SVC-ADP-5007': spec(422, GRPC.RESOURCE_EXHAUSTED, JSONRPC_APPLICATION, false, 'checkpoint store quota reached'),

  'SVC-SYS-9001': spec(503, GRPC.UNAVAILABLE, JSONRPC_INTERNAL, true, 'service temporarily unavailable'),
  'SVC-SYS-9002': spec(400, GRPC.INVALID_ARGUMENT, JSONRPC_INVALID_PARAMS, false, 'invalid request'),
  'SVC-SYS-9003': spec(401, GRPC.UNAUTHENTICATED, JSONRPC_APPLICATION, false, 'missing or invalid credentials'),
  'SVC-SYS-9004': spec(403, GRPC.PERMISSION_DENIED, JSONRPC_APPLICATION, false, 'insufficient permission'),
  'SVC-SYS-9005': spec(429, GRPC.RESOURCE_EXHAUSTED, JSONRPC_APPLICATION, true, 'rate limit exceeded'),
  'SVC-SYS-9006': spec(404, GRPC.NOT_FOUND, JSONRPC_APPLICATION, false, 'resource not found'),
  'SVC-SYS-9007': spec(500, GRPC.INTERNAL, JSONRPC_INTERNAL, true, 'internal error'),
  'SVC-SYS-9008': spec(409, GRPC.ALREADY_EXISTS, JSONRPC_APPLICATION, false, 'resource already exists'),
  'SVC-SYS-9009': spec(413, GRPC.OUT_OF_RANGE, JSONRPC_INVALID_PARAMS, false, 'payload too large'),
  'SVC-SYS-9010': spec(504, GRPC.DEADLINE_EXCEEDED, JSONRPC_APPLICATION, true, 'deadline exceeded'),
  'SVC-SYS-9011': spec(501, GRPC.UNIMPLEMENTED, JSONRPC_APPLICATION, false, 'not implemented'),
} as const satisfies Record<string, ErrorSpec>;

export type SvcCode = keyof typeof ERROR_CATALOGUE;

export function isSvcCode(value: string): value is SvcCode {
  return Object.hasOwn(ERROR_CATALOGUE, value);
}
