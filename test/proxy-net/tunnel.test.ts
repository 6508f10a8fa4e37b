import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { metricValue, rawConnect as connectVia, startRig, type Rig } from './harness.ts';

const run = promisify(execFile);
let rig: Rig;
/** A port whose egress check takes 200 ms, as a remote policy lookup might. */
let slowCheckPort = -1;

beforeAll(async () => {
  rig = await startRig({
    egressCheck: async (host, port) => {
      if (port === slowCheckPort) await new Promise((resolve) => setTimeout(resolve, 200));
      return host.endsWith('.denied.test') ? 'deny' : 'allow';
    },
  });
});
afterAll(async () => {
  await rig.close();
});

const rawConnect = (authority: string) => connectVia(rig.proxyPort, authority);

const sha256 = (data: Buffer): string => createHash('sha256').update(data).digest('hex');

describe('blind CONNECT tunnel', () => {
  it('relays the bytes of a host that is not intercepted untouched (curl through the proxy, end-to-end TLS to the origin)', async () => {
    const caFile = join(rig.dir, 'upstream-ca.pem');
    await writeFile(caFile, rig.upstreamCaPem);
    const { stdout } = await run(
      'curl',
      [
        '-sS',
        '--fail',
        '--noproxy',
        '',
        '-x',
        rig.proxyUrl,
        '--cacert',
        caFile,
        `https://127.0.0.1:${rig.httpsPort}/binary`,
      ],
      { encoding: 'buffer', maxBuffer: 4 * 1024 * 1024, timeout: 20_000 },
    );
    expect(stdout.length).toBe(rig.provider.binary.length);
    expect(sha256(stdout)).toBe(sha256(rig.provider.binary));
    // The origin's own certificate was accepted, so the proxy did not terminate TLS.
    expect(await metricValue(rig.registry, 'svc_proxy_connections_total', { mode: 'tunnel' })).toBe(1);
    expect(
      await metricValue(rig.registry, 'svc_proxy_tunnel_bytes_total', { direction: 'upstream_to_client' }),
    ).toBeGreaterThan(rig.provider.binary.length);
    expect(
      await metricValue(rig.registry, 'svc_proxy_tunnel_bytes_total', { direction: 'client_to_upstream' }),
    ).toBeGreaterThan(0);
  });

  it('relays a binary payload to a plain TCP echo untouched, and closes the client when the origin closes', async () => {
    const originSockets: Socket[] = [];
    const echo = createServer((socket) => {
      originSockets.push(socket);
      socket.pipe(socket);
    });
    await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = echo.address() as AddressInfo;
      const payload = randomBytes(200_000);
      const client = connect(rig.proxyPort, '127.0.0.1');
      client.write(`CONNECT 127.0.0.1:${port} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`);
      let received = Buffer.alloc(0);
      const established = 'HTTP/1.1 200 Connection Established\r\n\r\n';
      const echoed = new Promise<void>((resolve) => {
        client.on('data', (chunk: Buffer) => {
          received = Buffer.concat([received, chunk]);
          if (received.length >= established.length + payload.length) resolve();
        });
      });
      client.write(payload);
      await echoed;
      expect(received.subarray(0, established.length).toString()).toBe(established);
      expect(sha256(received.subarray(established.length))).toBe(sha256(payload));

      const clientClosed = new Promise<void>((resolve) => client.once('close', () => resolve()));
      originSockets[0]?.destroy();
      await clientClosed;
      expect(client.destroyed).toBe(true);
    } finally {
      await new Promise<void>((resolve) => echo.close(() => resolve()));
    }
  });

  it('closes the origin side when the client goes away', async () => {
    let originClosed!: () => void;
    const closedAtOrigin = new Promise<void>((resolve) => (originClosed = resolve));
    const origin = createServer((socket) => {
      socket.resume();
      socket.once('close', () => originClosed());
    });
    await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = origin.address() as AddressInfo;
      const client = connect(rig.proxyPort, '127.0.0.1');
      client.write(`CONNECT 127.0.0.1:${port} HTTP/1.1\r\nHost: x\r\n\r\n`);
      await new Promise<void>((resolve) => client.once('data', () => resolve()));
      client.destroy();
      // Resolves only if the proxy tore down its upstream socket; the test times out otherwise.
      await closedAtOrigin;
    } finally {
      await new Promise<void>((resolve) => origin.close(() => resolve()));
    }
  });

  it('leaves no upstream connection open for a client that left while the egress check ran', async () => {
    const origin = createServer((socket) => socket.resume());
    await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
    const openAtOrigin = (): Promise<number> =>
      new Promise((resolve, reject) => origin.getConnections((error, n) => (error ? reject(error) : resolve(n))));
    try {
      slowCheckPort = (origin.address() as AddressInfo).port;
      const client = connect(rig.proxyPort, '127.0.0.1');
      client.write(`CONNECT 127.0.0.1:${slowCheckPort} HTTP/1.1\r\nHost: x\r\n\r\n`, () => client.destroy());
      await new Promise((resolve) => setTimeout(resolve, 300)); // the egress check has answered by now
      let open = await openAtOrigin();
      for (let waited = 0; open > 0 && waited < 2000; waited += 20) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        open = await openAtOrigin();
      }
      expect(open).toBe(0);
    } finally {
      slowCheckPort = -1;
      await new Promise<void>((resolve) => origin.close(() => resolve()));
    }
  });

  it('refuses a CONNECT denied by the egress check with 403 naming SVC-ADP-5003', async () => {
    const answer = await rawConnect('exfil.denied.test:443');
    expect(answer).toMatch(/^HTTP\/1\.1 403 /);
    expect(answer).toContain('"code":"SVC-ADP-5003"');
    expect(await metricValue(rig.registry, 'svc_proxy_connections_total', { mode: 'refused' })).toBeGreaterThanOrEqual(
      1,
    );
  });

  it('answers 502 with SVC-ADP-5001 when the tunnel target does not accept the connection', async () => {
    const answer = await rawConnect('127.0.0.1:1');
    expect(answer).toMatch(/^HTTP\/1\.1 502 /);
    expect(answer).toContain('SVC-ADP-5001');
  });

  it('answers 400 with SVC-SYS-9002 to bytes that are not HTTP, and keeps serving', async () => {
    const socket = connect(rig.proxyPort, '127.0.0.1');
    let answer = '';
    socket.on('data', (chunk: Buffer) => (answer += chunk.toString('utf8')));
    socket.write('\x00\x01 not http at all\r\n\r\n');
    await new Promise<void>((resolve) => socket.once('close', () => resolve()));
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(answer).toContain('SVC-SYS-9002');
    expect(await rawConnect('exfil.denied.test:443')).toMatch(/^HTTP\/1\.1 403 /);
  });

  it('answers 400 with SVC-SYS-9002 for a malformed CONNECT target', async () => {
    const answer = await rawConnect('user@host:443');
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(answer).toContain('SVC-SYS-9002');
  });

  it('keeps serving after a client drops a tunnel mid-way', async () => {
    const socket = connect(rig.proxyPort, '127.0.0.1');
    socket.write(`CONNECT 127.0.0.1:${rig.httpsPort} HTTP/1.1\r\nHost: x\r\n\r\n`);
    await new Promise<void>((resolve) => socket.once('data', () => resolve()));
    socket.write(Buffer.from([0x16, 0x03, 0x01, 0x00, 0x05, 1, 2])); // a truncated TLS record
    socket.destroy();
    expect(await rawConnect('exfil.denied.test:443')).toMatch(/^HTTP\/1\.1 403 /);
  });
});
