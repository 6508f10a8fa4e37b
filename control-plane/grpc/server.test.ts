import { mkdtempSync, rmSync } from 'node:fs';
import {
  connect,
  constants,
  type ClientHttp2Session,
  type ClientHttp2Stream,
  type IncomingHttpHeaders,
} from 'node:http2';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { status, type ServiceDefinition } from '@grpc/grpc-js';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../core/config/load.ts';
import { SvcError } from '../../core/errors/index.ts';
import { eventually } from '../../test/harness/eventually.ts';
import { clientsFor, failure, statusDetails, unary, type Clients } from '../../test/harness/grpc.ts';
import { ApiKeys } from '../auth/api-keys.ts';
import { Authenticator } from '../auth/authenticator.ts';
import { createAuthFailureLimit, createRequestRate } from '../auth/request-rate.ts';
import { openStorage } from '../storage/open-storage.ts';
import type { Storage } from '../storage/storage.ts';
import { Tenants } from '../tenants/tenants.ts';
import { loadServedDefinition, servedFileDescriptors } from './contracts.ts';
import { createGrpcServer, type GrpcMethod, type GrpcServer, type GrpcServiceHandlers } from './server.ts';

const ROOT = 'root-administrator-key-for-grpc-server-0001';
const definition = loadServedDefinition();
const dir = mkdtempSync(join(tmpdir(), 'grpc-server-'));
let storage: Storage;
let healthy = true;
/** What the slow method saw: whether its signal was aborted when the call ended. */
const seen: { aborted?: boolean } = {};
/** How many GetPolicy request messages the server has deserialised. */
const deserialised = { count: 0 };
const getPolicy = (definition['svc.policy.v1.PolicyService'] as ServiceDefinition).GetPolicy!;
const decode = getPolicy.requestDeserialize;
getPolicy.requestDeserialize = (bytes: Buffer): unknown => {
  deserialised.count += 1;
  return decode(bytes);
};

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
  return services;
}

async function serve(options: { defaultTimeoutMs: number; maxMessageBytes: number }) {
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
    ...options,
  });
  const port = await server.listen('127.0.0.1', 0);
  return { server, port, clients: clientsFor(definition, `127.0.0.1:${String(port)}`) };
}

/** A GetPolicy stream whose message declares 4,000 bytes and sends 100 of them, never ending. */
function halfSentMessage(session: ClientHttp2Session, metadata: Record<string, string>): ClientHttp2Stream {
  const stream = session.request(
    {
      ':method': 'POST',
      ':path': '/svc.policy.v1.PolicyService/GetPolicy',
      'content-type': 'application/grpc',
      te: 'trailers',
      ...metadata,
    },
    { endStream: false },
  );
  stream.on('error', () => undefined);
  const prefix = Buffer.alloc(5);
  prefix.writeUInt32BE(4_000, 1);
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

describe('gRPC server limits', () => {
  let running: { server: GrpcServer; port: number; clients: Clients };
  beforeAll(async () => {
    storage = await openStorage(loadConfig({}, { data_dir: dir, log_level: 'silent' }), pino({ level: 'silent' }));
    running = await serve({ defaultTimeoutMs: 300, maxMessageBytes: 4096 });
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

  it('refuses a message above the limit with RESOURCE_EXHAUSTED and serves one below it', async () => {
    const policies = running.clients.client('svc.policy.v1.PolicyService');
    const small = await unary(policies, 'GetPolicy', { policy_id: 'p'.repeat(100) }, { key: ROOT });
    expect(small.policy.name).toBe('echo');
    const error = await failure(unary(policies, 'GetPolicy', { policy_id: 'p'.repeat(8192) }, { key: ROOT }));
    expect(error.code).toBe(status.RESOURCE_EXHAUSTED);
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
