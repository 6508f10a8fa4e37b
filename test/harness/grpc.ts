import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import {
  credentials,
  loadPackageDefinition,
  Metadata,
  type ChannelOptions,
  type Client,
  type GrpcObject,
  type ServiceClientConstructor,
  type ServiceError,
} from '@grpc/grpc-js';
import { loadFileDescriptorSetFromBuffer, loadSync, type PackageDefinition } from '@grpc/proto-loader';
// The protobuf runtime under @grpc/proto-loader, used here as an independent decoder of the
// google.rpc.Status details the server writes by hand.
import protobuf from 'protobufjs';
import { GOOGLEAPIS_ROOT, LOADER_OPTIONS } from '../../control-plane/grpc/contracts.ts';

export type UnaryClient = Client & Record<string, unknown>;

export interface CallOptions {
  /** Sent as `authorization: Bearer <key>`; null sends no credential. */
  key?: string | null;
  metadata?: Record<string, string>;
  /** Milliseconds from now. */
  deadlineMs?: number;
}

export interface Clients {
  client(service: string): UnaryClient;
  close(): void;
}

/** Clients for every service of a loaded definition, against `address` (host:port). */
export function clientsFor(definition: PackageDefinition, address: string, options: ChannelOptions = {}): Clients {
  const loaded = loadPackageDefinition(definition);
  const made: Client[] = [];
  return {
    client(service) {
      let node: unknown = loaded;
      for (const part of service.split('.')) node = (node as GrpcObject)[part];
      const Constructor = node as ServiceClientConstructor;
      const client = new Constructor(address, credentials.createInsecure(), options) as UnaryClient;
      made.push(client);
      return client;
    },
    close: () => made.forEach((c) => c.close()),
  };
}

/** Calls a unary method; resolves with the answer or rejects with the ServiceError. */
export function unary(
  client: UnaryClient,
  method: string,
  request: object,
  options: CallOptions & { defaultKey?: string } = {},
): Promise<Record<string, any>> {
  const metadata = new Metadata();
  const key = options.key === undefined ? options.defaultKey : options.key;
  if (key !== null && key !== undefined) metadata.set('authorization', `Bearer ${key}`);
  for (const [name, value] of Object.entries(options.metadata ?? {})) metadata.set(name, value);
  const fn = client[method] as (...args: unknown[]) => unknown;
  if (typeof fn !== 'function') throw new Error(`no method ${method}`);
  return new Promise((resolve, reject) => {
    fn.call(
      client,
      request,
      metadata,
      options.deadlineMs === undefined ? {} : { deadline: Date.now() + options.deadlineMs },
      (error: ServiceError | null, response: Record<string, any>) =>
        error === null ? resolve(response) : reject(error),
    );
  });
}

/** The ServiceError a call rejects with (fails the test when the call succeeds). */
export async function failure(call: Promise<unknown>): Promise<ServiceError> {
  try {
    await call;
  } catch (error) {
    return error as ServiceError;
  }
  throw new Error('the call succeeded');
}

const root = protobuf.loadSync(
  ['google/rpc/status.proto', 'google/rpc/error_details.proto'].map((f) => join(GOOGLEAPIS_ROOT, f)),
);
const StatusType = root.lookupType('google.rpc.Status');

export interface DecodedDetails {
  code: number;
  message: string;
  errorInfo?: { reason: string; domain: string; metadata: Record<string, string> };
  badRequest?: { fieldViolations: Array<{ field: string; description: string }> };
}

/** Decodes `grpc-status-details-bin` of an error with the protobuf runtime and the googleapis protos. */
export function statusDetails(error: ServiceError): DecodedDetails {
  const [bin] = error.metadata.get('grpc-status-details-bin');
  if (!(bin instanceof Buffer)) throw new Error('no grpc-status-details-bin');
  const status = StatusType.toObject(StatusType.decode(bin), { defaults: true }) as {
    code: number;
    message: string;
    details: Array<{ type_url: string; value: Uint8Array }>;
  };
  const decoded: DecodedDetails = { code: status.code, message: status.message };
  for (const detail of status.details) {
    const typeName = detail.type_url.replace('type.googleapis.com/', '');
    const type = root.lookupType(typeName);
    const value = type.toObject(type.decode(detail.value), { defaults: true });
    if (typeName === 'google.rpc.ErrorInfo') decoded.errorInfo = value as DecodedDetails['errorInfo'];
    if (typeName === 'google.rpc.BadRequest') decoded.badRequest = value as DecodedDetails['badRequest'];
  }
  return decoded;
}

const REFLECTION_PROTO = join(
  dirname(createRequire(import.meta.url).resolve('@grpc/reflection/package.json')),
  'build/proto/grpc/reflection/v1/reflection.proto',
);

function lengthDelimited(field: number, bytes: Buffer): Buffer {
  const length: number[] = [];
  let rest = bytes.length;
  while (rest > 0x7f) {
    length.push((rest & 0x7f) | 0x80);
    rest >>>= 7;
  }
  length.push(rest);
  return Buffer.concat([Buffer.from([(field << 3) | 2, ...length]), bytes]);
}

/**
 * What a client knows from server reflection alone: the services listed, and a definition built
 * from the file descriptors the server sends (no local `.proto` of the contracts).
 */
export async function discoverByReflection(
  address: string,
): Promise<{ services: string[]; definition: PackageDefinition }> {
  const reflection = loadPackageDefinition(loadSync(REFLECTION_PROTO, LOADER_OPTIONS));
  const Reflection = (reflection.grpc as GrpcObject).reflection as GrpcObject;
  const Client = (Reflection.v1 as GrpcObject).ServerReflection as ServiceClientConstructor;
  const client = new Client(address, credentials.createInsecure());
  const stream = (
    client as unknown as {
      ServerReflectionInfo: () => NodeJS.ReadWriteStream & { write(o: object): void; end(): void };
    }
  ).ServerReflectionInfo();
  const answers: Array<Record<string, any>> = [];
  const ask = (request: object) =>
    new Promise<Record<string, any>>((resolve, reject) => {
      stream.once('data', (answer: Record<string, any>) => {
        answers.push(answer);
        resolve(answer);
      });
      stream.once('error', reject);
      stream.write(request);
    });
  try {
    const listed = await ask({ list_services: '' });
    const services = (listed.list_services_response.service as Array<{ name: string }>).map((s) => s.name);
    const files = new Map<string, Buffer>();
    for (const service of services) {
      const answer = await ask({ file_containing_symbol: service });
      if (answer.error_response !== null && answer.error_response !== undefined)
        throw new Error(`reflection: ${JSON.stringify(answer.error_response)}`);
      for (const bytes of answer.file_descriptor_response.file_descriptor_proto as Buffer[])
        files.set(bytes.toString('base64'), bytes);
    }
    stream.end();
    const set = Buffer.concat([...files.values()].map((bytes) => lengthDelimited(1, bytes)));
    return { services, definition: loadFileDescriptorSetFromBuffer(set, LOADER_OPTIONS) };
  } finally {
    client.close();
  }
}
