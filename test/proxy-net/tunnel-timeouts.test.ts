import { connect as netConnect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRig, type Rig } from './harness.ts';

const HANDSHAKE_MS = 300;
const IDLE_MS = 400;
const ESTABLISHED = 'HTTP/1.1 200 Connection Established\r\n\r\n';

let handshakeRig: Rig;
let idleRig: Rig;
/** Accepts and stays silent, reading what it gets. */
let silent: Server;
/** Writes one byte every 100 ms and reads nothing back: a slow streamed answer. */
let trickle: Server;

async function listenTcp(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

/** A CONNECT through the proxy, resolved once the proxy has answered 200. */
async function tunnel(proxyPort: number, authority: string): Promise<Socket> {
  const socket = netConnect(proxyPort, '127.0.0.1');
  socket.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`);
  await new Promise<void>((resolve, reject) => {
    let answer = '';
    const onData = (chunk: Buffer) => {
      answer += chunk.toString('latin1');
      if (answer.length < ESTABLISHED.length) return;
      socket.off('data', onData);
      if (answer.startsWith(ESTABLISHED)) resolve();
      else reject(new Error(`CONNECT answered ${answer}`));
    };
    socket.on('data', onData);
  });
  return socket;
}

/** Milliseconds until `socket` closes, or undefined when it is still open after `waitMs`. */
async function closesWithin(socket: Socket | TLSSocket, waitMs: number): Promise<number | undefined> {
  const started = performance.now();
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(undefined), waitMs);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve(performance.now() - started);
    });
  });
}

/** Expects the proxy to close `socket` no sooner than `atLeastMs` and well within 3 s. */
async function expectClosedAfter(socket: Socket | TLSSocket, atLeastMs: number): Promise<void> {
  const closedAfter = await closesWithin(socket, 5000);
  socket.destroy();
  expect(closedAfter).toBeGreaterThanOrEqual(atLeastMs);
  expect(closedAfter).toBeLessThan(3000);
}

beforeAll(async () => {
  handshakeRig = await startRig({ tunnelHandshakeTimeoutMs: HANDSHAKE_MS });
  idleRig = await startRig({ tunnelIdleTimeoutMs: IDLE_MS });
  silent = createServer((socket) => socket.resume());
  trickle = createServer((socket) => {
    socket.resume();
    const timer = setInterval(() => socket.write('.'), 100);
    socket.once('close', () => clearInterval(timer));
    socket.on('error', () => socket.destroy());
  });
  await Promise.all([listenTcp(silent), listenTcp(trickle)]);
});
afterAll(async () => {
  await handshakeRig.close();
  await idleRig.close();
  for (const server of [silent, trickle]) {
    server.close();
  }
});

describe('TLS handshake timeout of an intercepted tunnel', () => {
  it('closes a tunnel whose client began a handshake and never finished it', async () => {
    const socket = await tunnel(handshakeRig.proxyPort, 'api.openai.com:443');
    // A TLS record header announcing 512 bytes, then one: the proxy's TLS side waits for the rest.
    socket.write(Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01]));
    await expectClosedAfter(socket, HANDSHAKE_MS - 50);
  });

  it('leaves a tunnel whose handshake completed open past the timeout', async () => {
    const raw = await tunnel(handshakeRig.proxyPort, 'api.openai.com:443');
    const secure = tlsConnect({ socket: raw, servername: 'api.openai.com', ca: handshakeRig.proxyCaPem });
    await new Promise<void>((resolve, reject) => {
      secure.once('secureConnect', resolve);
      secure.once('error', reject);
    });
    expect(await closesWithin(secure, HANDSHAKE_MS * 3)).toBeUndefined();
    secure.write('GET /v1/models HTTP/1.1\r\nHost: api.openai.com\r\nConnection: close\r\n\r\n');
    let answer = '';
    secure.on('data', (chunk: Buffer) => (answer += chunk.toString('utf8')));
    await new Promise<void>((resolve) => secure.once('close', () => resolve()));
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
  });
});

describe('idle timeout of tunnels', () => {
  it('closes a blind tunnel that carries no byte either way', async () => {
    const socket = await tunnel(idleRig.proxyPort, `127.0.0.1:${(silent.address() as AddressInfo).port}`);
    await expectClosedAfter(socket, IDLE_MS - 100);
  });

  it('keeps a blind tunnel open while bytes flow one way only, as a slow stream does', async () => {
    const socket = await tunnel(idleRig.proxyPort, `127.0.0.1:${(trickle.address() as AddressInfo).port}`);
    let received = 0;
    socket.on('data', (chunk: Buffer) => (received += chunk.length));
    expect(await closesWithin(socket, IDLE_MS * 4)).toBeUndefined();
    socket.destroy();
    expect(received).toBeGreaterThan(5);
  });

  it('closes an intercepted tunnel that stays quiet after its handshake', async () => {
    const raw = await tunnel(idleRig.proxyPort, 'api.openai.com:443');
    const secure = tlsConnect({ socket: raw, servername: 'api.openai.com', ca: idleRig.proxyCaPem });
    secure.on('error', () => secure.destroy());
    await new Promise<void>((resolve) => secure.once('secureConnect', resolve));
    await expectClosedAfter(secure, IDLE_MS - 100);
  });
});
