import type { FieldViolation } from '../../core/errors/index.ts';

/**
 * The `grpc-status-details-bin` trailer: a serialised `google.rpc.Status` whose details are an
 * `ErrorInfo` (reason: the SVC code) and, when fields were refused, a `BadRequest`. The four
 * messages have a handful of string and varint fields, so they are written here directly rather
 * than through a protobuf runtime; `test/control-plane/grpc.test.ts` decodes them with one.
 */
export interface StatusDetails {
  code: number;
  message: string;
  /** The SVC code, such as SVC-POL-2002. */
  reason: string;
  /** ErrorInfo metadata: the error's details as strings, its request id and documentation URL. */
  metadata: Record<string, string>;
  fieldViolations: readonly FieldViolation[];
}

export const ERROR_DOMAIN = 'svc.governance';

const TYPE_PREFIX = 'type.googleapis.com/';
const LENGTH_DELIMITED = 2;
const VARINT = 0;

function varint(value: number): Buffer {
  const bytes: number[] = [];
  let rest = value;
  while (rest > 0x7f) {
    bytes.push((rest & 0x7f) | 0x80);
    rest = Math.floor(rest / 128);
  }
  bytes.push(rest);
  return Buffer.from(bytes);
}

function bytesField(field: number, value: Buffer | string): Buffer {
  const payload = typeof value === 'string' ? Buffer.from(value, 'utf8') : value;
  return Buffer.concat([varint((field << 3) | LENGTH_DELIMITED), varint(payload.length), payload]);
}

function any(typeName: string, value: Buffer): Buffer {
  return Buffer.concat([bytesField(1, TYPE_PREFIX + typeName), bytesField(2, value)]);
}

function errorInfo(reason: string, metadata: Record<string, string>): Buffer {
  const entries = Object.entries(metadata).map(([key, value]) =>
    bytesField(3, Buffer.concat([bytesField(1, key), bytesField(2, value)])),
  );
  return Buffer.concat([bytesField(1, reason), bytesField(2, ERROR_DOMAIN), ...entries]);
}

function badRequest(violations: readonly FieldViolation[]): Buffer {
  return Buffer.concat(
    violations.map((v) => bytesField(1, Buffer.concat([bytesField(1, v.field), bytesField(2, v.description)]))),
  );
}

/** The serialised `google.rpc.Status`. */
export function encodeStatusDetails(status: StatusDetails): Buffer {
  const details = [any('google.rpc.ErrorInfo', errorInfo(status.reason, status.metadata))];
  if (status.fieldViolations.length > 0) details.push(any('google.rpc.BadRequest', badRequest(status.fieldViolations)));
  return Buffer.concat([
    varint((1 << 3) | VARINT),
    varint(status.code),
    bytesField(2, status.message),
    ...details.map((detail) => bytesField(3, detail)),
  ]);
}
