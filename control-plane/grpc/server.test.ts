import { mkdtempSync, rmSync } from 'node:fs';
import {
  connect,
  constants,
  type ClientHttp2Session,
  type ClientHttp2Stream,
  type IncomingHttpHeaders,
} from 'node:http2';
import { connect as netConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  Client,
  compressionAlgorithms,
  credentials,
  Metadata,
  status,
  type ServiceError,
  type ServiceDefinition,
} from '@grpc/grpc-js';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../core/config/load.ts';
import { MAX_JSON_VALUES } from '../../core/domain/index.ts';
import { SvcError } from '../../core/errors/index.ts';
import { eventually } from '../../test/harness/eventually.ts';
import { clientsFor, failure, statusDetails, unary, type Clients, type UnaryClient } from '../../test/harness/grpc.ts';
import { ApiKeys } from '../auth/api-keys.ts';
import { Authenticator } from '../auth/authenticator.ts';
import { createAuthFailureLimit } from '../auth/auth-failure-limit.ts';
import { createRequestRate } from '../auth/request-rate.ts';
import { openStorage } from '../storage/open-storage.ts';
import type { Storage } from '../storage/storage.ts';
import { Tenants } from '../tenants/tenants.ts';
import { loadServedDefinition, servedFileDescriptors } from './contracts.ts';
import { MAX_REQUEST_MESSAGES, SMALL_REQUEST_BYTES } from './request-bytes.ts';
import { createGrpcServer, type GrpcMethod, type GrpcServer, type GrpcServiceHandlers } from './server.ts';

const ROOT = 'root-administrator-key-for-grpc-server-0001';
const definition = loadServedDefinition();
const dir = mkdtempSync(join(tmpdir(), 'grpc-server-'));
let storage: Storage;
let healthy = true;
/** What the slow method saw: whether its signal was aborted when the call ended. */
const seen: { aborted?: boolean } = {};
/** Counts the request messages of a method that the server deserialises. */
function countDecoded(service: string, method: string): { count: number } {
  const counted = { count: 0 };
  const definitionOf = (definition[service] as ServiceDefinition)[method]!;
  const decode = definitionOf.requestDeserialize;
  definitionOf.requestDeserialize = (bytes: Buffer): unknown => {
    counted.count += 1;
    return decode(bytes);
  };
  return counted;
}
const deserialised = countDecoded('svc.policy.v1.PolicyService', 'GetPolicy');
const checkpointsDecoded = countDecoded('svc.checkpoint.v1.CheckpointService', 'SaveCheckpoint');

/** What holds the SaveCheckpoint calls until released. */
const held = { entered: 0, released: Promise.resolve(), release: () => undefined as void };
function holdCheckpoints(): void {
  held.entered = 0;
  held.released = new Promise((resolve) => {
    held.release = resolve;
  });
}

/** A method this server test does not need: refused as UNIMPLEMENTED after authentication. */
function unimplemented(method: string): GrpcMethod {
  return {
    access: 'authenticated',
    handle: () => Promise.reject(new SvcError('SVC-SYS-9011', `${method} is not served here`, { method })),
  };
}

function handlers(): Record<string, GrpcServiceHandlers> {
  const services: Record<string, GrpcServiceHandlers> = {};
  for (const [name, entry] of Object.entries(definition)) {
    if (!name.startsWith('svc.') || 'format' in entry) continue;
    services[name] = Object.fromEntries(Object.keys(entry).map((method) => [method, unimplemented(method)]));
  }
  // ListPolicies waits until its call is aborted; GetPolicy echoes what it was sent.
  services['svc.policy.v1.PolicyService']!.ListPolicies = {
    access: 'authenticated',
    handle: (_request, { signal }) =>
      new Promise((resolve) => {
        signal.addEventListener('abort', () => {
          seen.aborted = true;
          resolve({ policies: [] });
        });
      }),
  };
  services['svc.policy.v1.PolicyService']!.GetPolicy = {
    access: 'authenticated',
    handle: (request) => Promise.resolve({ policy: { policy_id: request.policy_id, name: 'echo' } }),
  };
  // SaveCheckpoint takes large requests and holds each until `held.release()`.
  services['svc.checkpoint.v1.CheckpointService']!.SaveCheckpoint = {
    access: 'authenticated',
    largeRequest: true,
    handle: async () => {
      held.entered += 1;
      await held.released;
      return { checkpoint_id: 'c', version: 1 };
    },
  };
  return services;
}

async function serve(options: { defaultTimeoutMs: number; maxMessageBytes: number; maxReceivedBytes: number }) {
  const server = createGrpcServer({
    definition,
    fileDescriptors: servedFileDescriptors(),
    services: handlers(),
    authenticator: new Authenticator(new ApiKeys(storage), null, ROOT, () => new Date(), createAuthFailureLimit(1000)),
    requestRate: createRequestRate(1000),
    tenants: new Tenants(storage),
    logger: pino({ level: 'silent' }),
    documentationBase: () => 'http://docs.test',
    health: () => Promise.resolve(healthy),
    defaultTimeoutMs: options.defaultTimeoutMs,
    maxMessageBytes: options.maxMessageBytes,
    limits: {
      maxConcurrentStreams: 100,
      maxSessionMemoryMb: 64,
      maxConnectionIdleMs: 300_000,
      maxConnectionAgeMs: 3_600_000,
      maxReceivedBytes: options.maxReceivedBytes,
    },
  });
  const port = await server.listen('127.0.0.1', 0);
  return { server, port, clients: clientsFor(definition, `127.0.0.1:${String(port)}`) };
}

/** An HTTP/2 connection to the server on `port` from the loopback address `from`. */
function sessionFrom(port: number, from: string): ClientHttp2Session {
  return connect(`http://127.0.0.1:${String(port)}`, {
    createConnection: () => netConnect({ host: '127.0.0.1', port, localAddress: from }),
  });
}

/** `message` with its gRPC length prefix. */
function framed(message: Buffer): Buffer {
  const prefix = Buffer.alloc(5);
  prefix.writeUInt32BE(message.length, 1);
  return Buffer.concat([prefix, message]);
}

/** A stream whose message declares `declared` bytes and sends 100 of them, never ending. */
function halfSentMessage(
  session: ClientHttp2Session,
  metadata: Record<string, string>,
  { path = '/svc.policy.v1.PolicyService/GetPolicy', declared = 4_000 } = {},
): ClientHttp2Stream {
  const stream = session.request(
    {
      ':method': 'POST',
      ':path': path,
      'content-type': 'application/grpc',
      te: 'trailers',
      ...metadata,
    },
    { endStream: false },
  );
  stream.on('error', () => undefined);
  const prefix = Buffer.alloc(5);
  prefix.writeUInt32BE(declared, 1);
  stream.write(Buffer.concat([prefix, Buffer.alloc(100, 1)]));
  return stream;
}

interface StreamEnd {
  rstCode: number | undefined;
  grpcStatus: string | undefined;
  svcCode: string | undefined;
}

/** How the server answered a stream: its gRPC status (headers or trailers), or its reset code. */
function ending(stream: ClientHttp2Stream): Promise<StreamEnd> {
  const end: StreamEnd = { rstCode: undefined, grpcStatus: undefined, svcCode: undefined };
  stream.resume();
  return new Promise((resolve) => {
    const read = (headers: IncomingHttpHeaders) => {
      end.grpcStatus = headers['grpc-status'] as string | undefined;
      end.svcCode = headers['svc-code'] as string | undefined;
      if (end.grpcStatus !== undefined) resolve(end);
    };
    stream.on('response', read);
    stream.on('trailers', read);
    stream.on('close', () => {
      end.rstCode = stream.rstCode;
      resolve(end);
    });
  });
}

/** How the server answered those of `streams` it answered within `ms`; the rest stay open. */
async function endsWithin(streams: ClientHttp2Stream[], ms: number, expected: number): Promise<StreamEnd[]> {
  const ends: StreamEnd[] = [];
  for (const stream of streams) void ending(stream).then((end) => ends.push(end));
  const started = Date.now();
  while (ends.length < expected && Date.now() - started < ms) await new Promise((r) => setTimeout(r, 20));
  // Long enough for one more than expected to have been answered too.
  await new Promise((r) => setTimeout(r, 100));
  return ends;
}

const MAX_MESSAGE = 4 * SMALL_REQUEST_BYTES;

/** Runs `test` on a server of its own whose budget and largest message are `budget` bytes. */
async function onOwnServer(
  budget: number,
  test: (own: { port: number; clients: Clients }) => Promise<void>,
): Promise<void> {
  const own = await serve({ defaultTimeoutMs: 10_000, maxMessageBytes: budget, maxReceivedBytes: budget });
  try {
    await test(own);
  } finally {
    own.clients.close();
    await own.server.close(1_000);
  }
}

/** A SaveCheckpoint whose execution id is `idBytes` long. */
function saveCheckpoint(client: UnaryClient, idBytes: number): Promise<Record<string, any>> {
  return unary(client, 'SaveCheckpoint', { checkpoint: { execution_id: 'x'.repeat(idBytes) } }, { key: ROOT });
}

/** A length-delimited protobuf field. */
function field(number: number, payload: Buffer): Buffer {
  const varint = (value: number): number[] => {
    const bytes: number[] = [];
    for (let rest = value; ; rest = Math.floor(rest / 128)) {
      if (rest < 128) return [...bytes, rest];
      bytes.push((rest % 128) | 128);
    }
  };
  return Buffer.concat([Buffer.from(varint((number << 3) | 2)), Buffer.from(varint(payload.length)), payload]);
}

/** A SaveCheckpointRequest whose `checkpoint.data` holds `levels` lists, one in another. */
function nestedCheckpoint(levels: number): Buffer {
  let value: Buffer = Buffer.from([0x08, 0x00]); // google.protobuf.Value { null_value: NULL_VALUE }
  for (let i = 0; i < levels; i++) value = field(6, field(1, value)); // Value { list_value { values: [value] } }
  const data = field(1, Buffer.concat([field(1, Buffer.from('deep')), field(2, value)])); // Struct { fields }
  return field(1, field(7, data)); // SaveCheckpointRequest { checkpoint { data } }
}

/** A SaveCheckpointRequest whose `checkpoint.data` is `{"many": value}`. */
function checkpointOf(value: Buffer): Buffer {
  const data = field(1, Buffer.concat([field(1, Buffer.from('many')), field(2, value)])); // Struct { fields }
  return field(1, field(7, data));
}

/** Sends `bytes` as the request message of `path` with the official client, unencoded. */
function rawCall(clients: Clients, path: string, bytes: Buffer): Promise<unknown> {
  const client = clients.client('svc.checkpoint.v1.CheckpointService');
  const metadata = new Metadata();
  metadata.set('authorization', `Bearer ${ROOT}`);
  return new Promise((resolve, reject) => {
    client.makeUnaryRequest(
      path,
      (message: Buffer) => message,
      (answer: Buffer) => answer,
      bytes,
      metadata,
      (error: ServiceError | null, answer?: Buffer) => (error === null ? resolve(answer) : reject(error)),
    );
  });
}

describe('gRPC server limits', () => {
  let running: { server: GrpcServer; port: number; clients: Clients };
  beforeAll(async () => {
    storage = await openStorage(loadConfig({}, { data_dir: dir, log_level: 'silent' }), pino({ level: 'silent' }));
    running = await serve({ defaultTimeoutMs: 300, maxMessageBytes: MAX_MESSAGE, maxReceivedBytes: 3 * MAX_MESSAGE });
  });
  afterAll(async () => {
    running.clients.close();
    await running.server.close(1_000);
    await storage.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('ends a call without a client deadline at the default one, with SVC-SYS-9010, and aborts its work', async () => {
    const policies = running.clients.client('svc.policy.v1.PolicyService');
    const started = Date.now();
    const error = await failure(unary(policies, 'ListPolicies', {}, { key: ROOT }));
    expect(error.code).toBe(status.DEADLINE_EXCEEDED);
    expect(statusDetails(error).errorInfo?.reason).toBe('SVC-SYS-9010');
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    expect(seen.aborted).toBe(true);
  });

  it('honours a client deadline shorter than the default one', async () => {
    const policies = running.clients.client('svc.policy.v1.PolicyService');
    const error = await failure(unary(policies, 'ListPolicies', {}, { key: ROOT, deadlineMs: 100 }));
    expect(error.code).toBe(status.DEADLINE_EXCEEDED);
  });

  it('refuses a call without a valid credential before reading its message', async () => {
    const policies = running.clients.client('svc.policy.v1.PolicyService');
    deserialised.count = 0;
    for (const key of [null, 'not-a-key-of-this-control-plane']) {
      const error = await failure(unary(policies, 'GetPolicy', { policy_id: 'p' }, { key }));
      expect(error.code).toBe(status.UNAUTHENTICATED);
      expect(statusDetails(error).errorInfo?.reason).toBe('SVC-SYS-9003');
    }
    expect(deserialised.count).toBe(0);
    await unary(policies, 'GetPolicy', { policy_id: 'p' }, { key: ROOT });
    expect(deserialised.count).toBe(1);
  });

  it('refuses a stream past 100 on one connection, and answers unauthenticated streams without reading their message', async () => {
    // Node's client keeps to 100 streams until the server's settings arrive; an attacker's need not.
    const session = connect(`http://127.0.0.1:${String(running.port)}`, { peerMaxConcurrentStreams: 1_000 });
    try {
      // Opened at once, before the server's settings are known.
      const streams = Array.from({ length: 101 }, () => halfSentMessage(session, {}));
      const ends = await Promise.all(streams.map(ending));
      expect(ends.filter((end) => end.rstCode === constants.NGHTTP2_REFUSED_STREAM)).toHaveLength(1);
      expect(ends.filter((end) => end.grpcStatus === String(status.UNAUTHENTICATED))).toHaveLength(100);
    } finally {
      session.destroy();
    }
  });

  it('ends an authenticated call whose message never completes at the default deadline', async () => {
    const session = connect(`http://127.0.0.1:${String(running.port)}`);
    try {
      const started = Date.now();
      const end = await ending(halfSentMessage(session, { authorization: `Bearer ${ROOT}` }));
      expect(end.grpcStatus).toBe(String(status.DEADLINE_EXCEEDED));
      expect(end.svcCode).toBe('SVC-SYS-9010');
      expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    } finally {
      session.destroy();
    }
  });

  it('ends a health call whose message never completes at the default deadline, credential or not', async () => {
    const session = connect(`http://127.0.0.1:${String(running.port)}`);
    try {
      const check = halfSentMessage(session, {}, { path: '/grpc.health.v1.Health/Check' });
      expect(await endsWithin([check], 3_000, 1)).toEqual([
        { rstCode: undefined, grpcStatus: String(status.DEADLINE_EXCEEDED), svcCode: 'SVC-SYS-9010' },
      ]);
    } finally {
      session.destroy();
    }
  });

  it('refuses a message above the limit with RESOURCE_EXHAUSTED and serves one below it', async () => {
    const policies = running.clients.client('svc.policy.v1.PolicyService');
    const small = await unary(policies, 'GetPolicy', { policy_id: 'p'.repeat(100) }, { key: ROOT });
    expect(small.policy.name).toBe('echo');
    const error = await failure(unary(policies, 'GetPolicy', { policy_id: 'p'.repeat(MAX_MESSAGE) }, { key: ROOT }));
    expect(error.code).toBe(status.RESOURCE_EXHAUSTED);
  });

  it('refuses a request above its method’s limit with SVC-SYS-9009 before decoding it', async () => {
    const policies = running.clients.client('svc.policy.v1.PolicyService');
    deserialised.count = 0;
    const request = { policy_id: 'p'.repeat(SMALL_REQUEST_BYTES) };
    const error = await failure(unary(policies, 'GetPolicy', request, { key: ROOT }));
    expect(error.code).toBe(status.OUT_OF_RANGE);
    expect(statusDetails(error).errorInfo?.reason).toBe('SVC-SYS-9009');
    expect(statusDetails(error).errorInfo?.metadata.limit_bytes).toBe(String(SMALL_REQUEST_BYTES));
    expect(deserialised.count).toBe(0);
    // A method carrying free-form data takes the same request size.
    const checkpoints = running.clients.client('svc.checkpoint.v1.CheckpointService');
    const checkpoint = { execution_id: 'x'.repeat(SMALL_REQUEST_BYTES) };
    expect(await unary(checkpoints, 'SaveCheckpoint', { checkpoint }, { key: ROOT })).toMatchObject({
      checkpoint_id: 'c',
    });
  });

  it('refuses a request while those received and unanswered hold the server’s budget, with SVC-SYS-9005', async () => {
    // Its own server: the shared one's default deadline would end the held calls.
    const patient = await serve({
      defaultTimeoutMs: 10_000,
      maxMessageBytes: MAX_MESSAGE,
      maxReceivedBytes: 3 * MAX_MESSAGE,
    });
    const checkpoints = patient.clients.client('svc.checkpoint.v1.CheckpointService');
    const checkpoint = { execution_id: 'x'.repeat(MAX_MESSAGE - 100) };
    const save = () => unary(checkpoints, 'SaveCheckpoint', { checkpoint }, { key: ROOT });
    holdCheckpoints();
    try {
      // Three requests of nearly the largest size fit the budget of three; held, they fill it.
      const calls = Promise.all([save(), save(), save()]);
      await eventually(
        () => held.entered,
        (entered) => entered === 3,
        3_000,
      );
      const refused = await failure(save());
      expect(refused.code).toBe(status.RESOURCE_EXHAUSTED);
      expect(statusDetails(refused).errorInfo?.reason).toBe('SVC-SYS-9005');
      held.release();
      await calls;
      // Answered, they hold nothing.
      expect(await save()).toMatchObject({ checkpoint_id: 'c' });
    } finally {
      held.release();
      patient.clients.close();
      await patient.server.close(1_000);
    }
  });

  it('counts messages from their length prefix as they arrive: past the budget they are refused at once, and give their bytes back when their call ends', async () => {
    await onOwnServer(MAX_MESSAGE, async ({ port, clients }) => {
      const session = connect(`http://127.0.0.1:${String(port)}`);
      const checkpoints = clients.client('svc.checkpoint.v1.CheckpointService');
      const serialize = (definition['svc.checkpoint.v1.CheckpointService'] as ServiceDefinition).SaveCheckpoint!
        .requestSerialize as (request: object) => Buffer;
      const overhead = serialize({ checkpoint: { execution_id: 'x'.repeat(MAX_MESSAGE) } }).length - MAX_MESSAGE;
      expect(serialize({ checkpoint: { execution_id: 'x'.repeat(MAX_MESSAGE - overhead) } })).toHaveLength(MAX_MESSAGE);
      try {
        for (let round = 0; round < 3; round++) {
          // Twenty messages of a quarter of the budget less 1,000 bytes, 100 bytes of each sent: four fit.
          const streams = Array.from({ length: 20 }, () =>
            halfSentMessage(
              session,
              { authorization: `Bearer ${ROOT}` },
              { path: '/svc.checkpoint.v1.CheckpointService/SaveCheckpoint', declared: MAX_MESSAGE / 4 - 1_000 },
            ),
          );
          const ends = await endsWithin(streams, 5_000, 16);
          expect(ends).toHaveLength(16);
          for (const end of ends) {
            expect(end).toMatchObject({ grpcStatus: String(status.RESOURCE_EXHAUSTED), svcCode: 'SVC-SYS-9005' });
          }
          // The 4,000 bytes left serve a small call, and refuse a larger one.
          const policies = clients.client('svc.policy.v1.PolicyService');
          expect((await unary(policies, 'GetPolicy', { policy_id: 'p' }, { key: ROOT })).policy.name).toBe('echo');
          const refused = await failure(saveCheckpoint(checkpoints, 10_000));
          expect(refused.code).toBe(status.RESOURCE_EXHAUSTED);
          expect(statusDetails(refused).errorInfo?.reason).toBe('SVC-SYS-9005');
          // Cancelled, the four give their bytes back: the whole budget takes one message of its size.
          for (const stream of streams) stream.close(constants.NGHTTP2_CANCEL);
          await eventually(
            () =>
              saveCheckpoint(checkpoints, MAX_MESSAGE - overhead).then(
                () => 'served',
                (error: ServiceError) => error.details,
              ),
            (outcome) => outcome === 'served',
            5_000,
          );
        }
      } finally {
        session.destroy();
      }
    });
  });

  it('holds a compressed request’s bytes as decompressed, not as sent', async () => {
    await onOwnServer(MAX_MESSAGE, async ({ port, clients }) => {
      const gzip = clientsFor(definition, `127.0.0.1:${String(port)}`, {
        'grpc.default_compression_algorithm': compressionAlgorithms.gzip,
      });
      holdCheckpoints();
      try {
        // A few hundred bytes on the wire, all but 1,000 of the budget once decompressed.
        const compressed = saveCheckpoint(gzip.client('svc.checkpoint.v1.CheckpointService'), MAX_MESSAGE - 1_000);
        await eventually(
          () => held.entered,
          (entered) => entered === 1,
          5_000,
        );
        const refused = await failure(saveCheckpoint(clients.client('svc.checkpoint.v1.CheckpointService'), 2_000));
        expect(statusDetails(refused).errorInfo?.reason).toBe('SVC-SYS-9005');
        held.release();
        expect(await compressed).toMatchObject({ checkpoint_id: 'c' });
      } finally {
        held.release();
        gzip.close();
      }
    });
  });

  it('counts health and reflection messages as they arrive, against a budget of their own', async () => {
    await onOwnServer(MAX_MESSAGE, async ({ port, clients }) => {
      const session = connect(`http://127.0.0.1:${String(port)}`);
      const check = { path: '/grpc.health.v1.Health/Check' };
      try {
        // Above what their requests need, refused at the prefix, credential or not.
        const large = await endsWithin(
          [halfSentMessage(session, {}, { ...check, declared: SMALL_REQUEST_BYTES + 1 })],
          5_000,
          1,
        );
        expect(large).toEqual([
          { rstCode: undefined, grpcStatus: String(status.OUT_OF_RANGE), svcCode: 'SVC-SYS-9009' },
        ]);
        // Four of 64,000 bytes fit the budget, a fifth does not (each from an address of its own).
        const sessions = [2, 3, 4, 5, 6].map((host) => sessionFrom(port, `127.0.0.${String(host)}`));
        const streams = sessions.map((from) => halfSentMessage(from, {}, { ...check, declared: 64_000 }));
        const ends = await endsWithin(streams, 5_000, 1);
        for (const from of sessions) from.destroy();
        expect(ends).toEqual([
          { rstCode: undefined, grpcStatus: String(status.RESOURCE_EXHAUSTED), svcCode: 'SVC-SYS-9005' },
        ]);
        // Callers without a credential hold none of the contracts' services' budget.
        const checkpoints = clients.client('svc.checkpoint.v1.CheckpointService');
        expect(await saveCheckpoint(checkpoints, MAX_MESSAGE - 100)).toMatchObject({ checkpoint_id: 'c' });
      } finally {
        session.destroy();
      }
    });
  });

  it('lets one address hold only a share of the health and reflection budget, so a health check from another is served', async () => {
    // One address may hold a sixteenth of 16 × 64 KiB: one request of 64 KiB.
    await onOwnServer(16 * SMALL_REQUEST_BYTES, async ({ port, clients }) => {
      const session = sessionFrom(port, '127.0.0.2');
      const check = { path: '/grpc.health.v1.Health/Check' };
      try {
        // Were it not bounded, these would hold the whole budget; one more byte is refused.
        const declared = [...Array.from({ length: 16 }, () => SMALL_REQUEST_BYTES), 1];
        const streams = declared.map((bytes) => halfSentMessage(session, {}, { ...check, declared: bytes }));
        const ends = await endsWithin(streams, 5_000, 16);
        expect(ends).toHaveLength(16);
        for (const end of ends) {
          expect(end).toEqual({
            rstCode: undefined,
            grpcStatus: String(status.RESOURCE_EXHAUSTED),
            svcCode: 'SVC-SYS-9005',
          });
        }
        const health = clients.client('grpc.health.v1.Health');
        expect(await unary(health, 'Check', { service: 'svc.policy.v1.PolicyService' })).toEqual({
          status: 'SERVING',
        });
        // Once its calls end, the address holds nothing and is served again.
        session.destroy();
        const again = sessionFrom(port, '127.0.0.2');
        const namedCheck = (): Promise<StreamEnd> => {
          const stream = again.request({
            ':method': 'POST',
            ':path': check.path,
            'content-type': 'application/grpc',
            te: 'trailers',
          });
          stream.on('error', () => undefined);
          stream.end(framed(field(1, Buffer.from('svc.policy.v1.PolicyService'))));
          return ending(stream);
        };
        try {
          await eventually(namedCheck, (end) => end.grpcStatus === String(status.OK));
        } finally {
          again.destroy();
        }
      } finally {
        session.destroy();
      }
    });
  });

  it('ends a reflection stream whose later message does not arrive whole within the default deadline of its first byte', async () => {
    const session = connect(`http://127.0.0.1:${String(running.port)}`);
    try {
      const stream = session.request({
        ':method': 'POST',
        ':path': '/grpc.reflection.v1.ServerReflection/ServerReflectionInfo',
        'content-type': 'application/grpc',
        te: 'trailers',
      });
      stream.on('error', () => undefined);
      const answered = (): Promise<void> => new Promise((resolve) => stream.once('data', () => resolve()));
      const listServices = framed(field(7, Buffer.alloc(0)));
      // Whole messages further apart than the deadline are answered: it times messages, not the stream.
      for (let i = 0; i < 2; i++) {
        const answer = answered();
        stream.write(listServices);
        await answer;
        await new Promise((r) => setTimeout(r, 400));
      }
      const started = Date.now();
      stream.write(listServices.subarray(0, 3));
      expect(await endsWithin([stream], 3_000, 1)).toEqual([
        { rstCode: undefined, grpcStatus: String(status.DEADLINE_EXCEEDED), svcCode: 'SVC-SYS-9010' },
      ]);
      expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    } finally {
      session.destroy();
    }
  });

  it('gives back a reflection request’s bytes once its handler has it, however long its stream', async () => {
    await onOwnServer(1_024, async ({ port }) => {
      const client = new Client(`127.0.0.1:${String(port)}`, credentials.createInsecure());
      try {
        const call = client.makeBidiStreamRequest(
          '/grpc.reflection.v1.ServerReflection/ServerReflectionInfo',
          (bytes: Buffer) => bytes,
          (bytes: Buffer) => bytes,
        );
        // ServerReflectionRequest { host, file_containing_symbol }: 206 bytes, thirty of them 6 KB.
        const request = Buffer.concat([field(1, Buffer.from('h'.repeat(100))), field(4, Buffer.from('x'.repeat(100)))]);
        let answered = 0;
        await new Promise<void>((resolve, reject) => {
          call.on('data', () => {
            answered += 1;
            if (answered === 30) call.end();
            else call.write(request);
          });
          call.on('error', reject);
          call.on('end', resolve);
          call.write(request);
        });
        expect(answered).toBe(30);
      } finally {
        client.close();
      }
    });
  });

  it('refuses a request nested past the decoder’s depth limit as INVALID_ARGUMENT, SVC-SYS-9002', async () => {
    const error = await failure(
      rawCall(running.clients, '/svc.checkpoint.v1.CheckpointService/SaveCheckpoint', nestedCheckpoint(60)),
    );
    expect(error.code).toBe(status.INVALID_ARGUMENT);
    expect(statusDetails(error).errorInfo?.reason).toBe('SVC-SYS-9002');
    expect(error.details).toContain('nested deeper');
  });

  it('refuses a request of more messages than free-form JSON at its bound takes, with SVC-SYS-9009 before decoding it', async () => {
    const large = await serve({
      defaultTimeoutMs: 10_000,
      maxMessageBytes: 4 * 1024 * 1024,
      maxReceivedBytes: 16 * 1024 * 1024,
    });
    const path = '/svc.checkpoint.v1.CheckpointService/SaveCheckpoint';
    try {
      // A million empty lists in 4 MB: decoded, they held the event loop for seconds.
      const emptyList = field(1, field(6, Buffer.alloc(0))); // ListValue.values: Value { list_value {} }
      const lists = checkpointOf(field(6, Buffer.concat(Array.from({ length: 1_000_000 }, () => emptyList))));
      checkpointsDecoded.count = 0;
      const error = await failure(rawCall(large.clients, path, lists));
      expect(error.code).toBe(status.OUT_OF_RANGE);
      expect(statusDetails(error).errorInfo?.reason).toBe('SVC-SYS-9009');
      expect(statusDetails(error).errorInfo?.metadata.limit_messages).toBe(String(MAX_REQUEST_MESSAGES));
      expect(checkpointsDecoded.count).toBe(0);
      // JSON at its bound (100,000 values: a list of 99,999 numbers) is decoded and served.
      const number = field(1, Buffer.from([0x11, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f])); // Value { number_value: 1 }
      const atBound = checkpointOf(field(6, Buffer.concat(Array.from({ length: MAX_JSON_VALUES - 1 }, () => number))));
      expect(atBound.length).toBeGreaterThan(SMALL_REQUEST_BYTES);
      await rawCall(large.clients, path, atBound);
      expect(checkpointsDecoded.count).toBe(1);
    } finally {
      large.clients.close();
      await large.server.close(1_000);
    }
  });

  it('reports NOT_SERVING while the store or the bus is down, within the second one probe serves', async () => {
    const health = running.clients.client('grpc.health.v1.Health');
    const check = () => unary(health, 'Check', { service: '' });
    healthy = false;
    expect(await eventually(check, (answer) => answer.status === 'NOT_SERVING', 2_000)).toEqual({
      status: 'NOT_SERVING',
    });
    healthy = true;
    expect(await eventually(check, (answer) => answer.status === 'SERVING', 2_000)).toEqual({ status: 'SERVING' });
  });
});
