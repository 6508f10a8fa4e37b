import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProxyRig, type ProxyRig } from './harness.ts';

const FIRST_BYTES_MS = 300;
let rig: ProxyRig;

beforeAll(async () => {
  rig = await startProxyRig({ proxy_tunnel_first_bytes_timeout_ms: FIRST_BYTES_MS });
});
afterAll(() => rig.close());

/** A CONNECT through the proxy, resolved with the socket once the proxy has answered. */
async function tunnel(authority: string): Promise<{ socket: Socket; answer: string }> {
  const socket = connect(rig.addresses.proxyPort, '127.0.0.1');
  socket.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`);
  const answer = await new Promise<string>((resolve) => socket.once('data', (chunk: Buffer) => resolve(String(chunk))));
  return { socket, answer };
}

describe('tunnel timeouts from the configuration', () => {
  it('closes an intercepted CONNECT that stays silent past proxy_tunnel_first_bytes_timeout_ms', async () => {
    const { socket, answer } = await tunnel('api.openai.com:443');
    expect(answer).toMatch(/^HTTP\/1\.1 200/);
    const started = performance.now();
    await new Promise((resolve) => socket.once('close', resolve));
    const closedAfter = performance.now() - started;
    expect(closedAfter).toBeGreaterThanOrEqual(FIRST_BYTES_MS - 50);
    // The default (10 s) would keep it open far longer.
    expect(closedAfter).toBeLessThan(5_000);
  });
});
