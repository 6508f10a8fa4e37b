import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadSync, type Options, type PackageDefinition } from '@grpc/proto-loader';

/** Root of the `.proto` contracts; their imports are relative to it (`svc/cost/v1/cost.proto`). */
export const PROTO_ROOT = fileURLToPath(new URL('../../proto/', import.meta.url));

/** The googleapis protos (`google/api/annotations.proto`, ...), the same files buf lints against. */
export const GOOGLEAPIS_ROOT = dirname(createRequire(import.meta.url).resolve('google-proto-files/package.json'));

/**
 * How the contracts are loaded: field names as written (snake_case, as on the REST surface),
 * 64-bit integers as decimal strings (no precision lost), enums by name (`ENVELOPE_STATUS_RUNNING`),
 * defaults filled in, and the set member of each oneof named.
 */
export const LOADER_OPTIONS = {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
  includeDirs: [PROTO_ROOT, GOOGLEAPIS_ROOT],
} satisfies Options;

/** Standard protocols the server speaks beside the contracts: `grpc/health/v1/health.proto`. */
export const STANDARD_PROTO_ROOT = fileURLToPath(new URL('./standard-protos/', import.meta.url));
export const HEALTH_PROTO = 'grpc/health/v1/health.proto';

/** The compiled descriptors of the contracts and the health service (build-descriptor-set.ts). */
export const DESCRIPTOR_SET_FILE = fileURLToPath(new URL('./contracts.binpb', import.meta.url));

/** Every `.proto` under PROTO_ROOT, relative to it with `/` separators, sorted. */
export function contractFiles(): string[] {
  return readdirSync(PROTO_ROOT, { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.proto'))
    .map((file) => file.split(sep).join('/'))
    .sort();
}

/** Loads every contract at once, so one definition holds all services and their HTTP options. */
export function loadContracts(): PackageDefinition {
  return loadSync(contractFiles(), LOADER_OPTIONS);
}

/**
 * What the gRPC server serves, and its reflection describes: every contract and the standard
 * health service, in one definition.
 */
export function loadServedDefinition(): PackageDefinition {
  return loadSync([...contractFiles(), HEALTH_PROTO], {
    ...LOADER_OPTIONS,
    includeDirs: [...LOADER_OPTIONS.includeDirs, STANDARD_PROTO_ROOT],
  });
}

/**
 * The files of the compiled descriptor set, each an encoded FileDescriptorProto: the set's one
 * field is `repeated FileDescriptorProto file = 1`, so it is split on that field's records.
 */
export function servedFileDescriptors(set: Buffer = readFileSync(DESCRIPTOR_SET_FILE)): Buffer[] {
  const files: Buffer[] = [];
  let at = 0;
  const varint = (): number => {
    let value = 0;
    let scale = 1;
    for (;;) {
      const byte = set[at++];
      if (byte === undefined) throw new Error('truncated descriptor set');
      value += (byte & 0x7f) * scale;
      if (byte < 0x80) return value;
      scale *= 128;
    }
  };
  while (at < set.length) {
    if (varint() !== ((1 << 3) | 2)) throw new Error('not a FileDescriptorSet');
    const length = varint();
    files.push(set.subarray(at, at + length));
    at += length;
  }
  return files;
}
