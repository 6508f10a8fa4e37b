import {
  Client,
  credentials,
  Server,
  ServerCredentials,
  ServerInterceptingCall,
  type ServiceDefinition,
  type ServiceError,
  type sendUnaryData,
  type ServerUnaryCall,
} from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { arrivingStreamOf, lengthPrefixes } from './arriving-messages.ts';

function framed(length: number): Buffer {
  const prefix = Buffer.alloc(5);
  prefix.writeUInt32BE(length, 1);
  return Buffer.concat([prefix, Buffer.alloc(length, 7)]);
}

/** What `lengthPrefixes` told of the messages of `wire`, as cut in chunks of `cut` bytes. */
function edgesOf(wire: Buffer, cut: number): (string | number)[] {
  const told: (string | number)[] = [];
  const read = lengthPrefixes({
    begun: () => told.push('begun'),
    declared: (bytes) => told.push(bytes),
    ended: () => told.push('ended'),
  });
  for (let at = 0; at < wire.length; at += cut) read(wire.subarray(at, at + cut));
  return told;
}

describe('lengthPrefixes', () => {
  it('tells each message’s start, length once its prefix is whole, and end, however the bytes are cut', () => {
    const wire = Buffer.concat([framed(3), framed(0), framed(70_000), framed(1)]);
    for (const cut of [1, 2, 4, 5, 6, 16_384, wire.length]) {
      expect(edgesOf(wire, cut)).toEqual([3, 0, 70_000, 1].flatMap((bytes) => ['begun', bytes, 'ended']));
    }
  });

  it('tells a message’s length before any of its bytes arrive, and no end before its last', () => {
    expect(edgesOf(framed(4 * 1024 * 1024).subarray(0, 5), 5)).toEqual(['begun', 4 * 1024 * 1024]);
    expect(edgesOf(framed(10).subarray(0, 14), 14)).toEqual(['begun', 10]);
    expect(edgesOf(framed(10).subarray(0, 2), 2)).toEqual(['begun']);
  });
});

const echo: ServiceDefinition = {
  Echo: {
    path: '/test.Echo/Echo',
    requestStream: false,
    responseStream: false,
    requestSerialize: (bytes: Buffer) => bytes,
    requestDeserialize: (bytes: Buffer) => bytes,
    responseSerialize: (bytes: Buffer) => bytes,
    responseDeserialize: (bytes: Buffer) => bytes,
  },
};

describe('arrivingStreamOf', () => {
  // It reads a private field of grpc-js: an upgrade that moves it fails here first.
  it('reaches the HTTP/2 stream of the call grpc-js gives its first server interceptor', async () => {
    const reached: unknown[] = [];
    const server = new Server({
      interceptors: [
        (_method, call) => {
          reached.push(arrivingStreamOf(call)?.session);
          return new ServerInterceptingCall(call);
        },
      ],
    });
    server.addService(echo, {
      Echo: (call: ServerUnaryCall<Buffer, Buffer>, callback: sendUnaryData<Buffer>) => callback(null, call.request),
    });
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (error, bound) =>
        error === null ? resolve(bound) : reject(error),
      ),
    );
    const client = new Client(`127.0.0.1:${String(port)}`, credentials.createInsecure());
    try {
      const answer = await new Promise<Buffer | undefined>((resolve, reject) =>
        client.makeUnaryRequest(
          '/test.Echo/Echo',
          (bytes: Buffer) => bytes,
          (bytes: Buffer) => bytes,
          Buffer.from('hello'),
          (error: ServiceError | null, bytes?: Buffer) => (error === null ? resolve(bytes) : reject(error)),
        ),
      );
      expect(answer?.toString()).toBe('hello');
      expect(reached).toHaveLength(1);
      expect(reached[0]).toBeDefined();
    } finally {
      client.close();
      server.forceShutdown();
    }
  });
});
