import { once } from 'node:events';
import { request } from 'node:http';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startControlPlane, tenantWithKey, type RunningControlPlane } from '../harness/control-plane.ts';

const LIMIT = 64 * 1024;
let cp: RunningControlPlane;
let key: string;

beforeAll(async () => {
  cp = await startControlPlane({ body_limit_bytes: LIMIT });
  key = await tenantWithKey(cp, 'oversized');
});
afterAll(async () => {
  await cp?.close();
});

interface Sent {
  status: number | undefined;
  connection: string | undefined;
  body: string;
  /** The error the client met while it was still sending, if any (a broken pipe). */
  error: string | null;
}

/** Sends `bytes` of body 16 KiB every 5 ms, as a client on a slow link does, and reads the answer. */
function sendSlowly(method: string, path: string, bytes: number): Promise<Sent> {
  const url = new URL(`${cp.url}${path}`);
  const body = Buffer.from(JSON.stringify({ name: 'x'.repeat(bytes - 11) }));
  return new Promise((resolve) => {
    const sent: Sent = { status: undefined, connection: undefined, body: '', error: null };
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method,
        headers: { 'content-type': 'application/json', 'x-api-key': key, 'content-length': body.length },
      },
      (res) => {
        sent.status = res.statusCode;
        sent.connection = res.headers.connection;
        res.setEncoding('utf8').on('data', (text: string) => (sent.body += text));
        res.on('end', () => resolve(sent));
      },
    );
    req.on('error', (error) => {
      sent.error = error.message;
      if (sent.status === undefined) resolve(sent);
    });
    let at = 0;
    const next = () => {
      if (req.destroyed) return;
      if (at >= body.length) return void req.end();
      req.write(body.subarray(at, at + 16 * 1024));
      at += 16 * 1024;
      setTimeout(next, 5);
    };
    next();
  });
}

describe('a request body over the limit', () => {
  it('is read to its end and refused 413 SVC-SYS-9009, so a client still sending it gets the answer, not a broken pipe', async () => {
    for (const [method, path] of [
      ['POST', '/v1/budgets'],
      ['DELETE', '/v1/budgets/39820e58-3971-4c4c-945d-dd13b64e9c5e'],
    ] as const) {
      const sent = await sendSlowly(method, path, LIMIT * 2);
      expect(sent.error).toBeNull();
      expect(sent.status).toBe(413);
      expect(JSON.parse(sent.body)).toMatchObject({ error: { code: 'SVC-SYS-9009' } });
      // The body was read, so the connection can serve the next request.
      expect(sent.connection).toBe('keep-alive');
    }
  });

  it('is not read past four times the limit: refused 413 on a connection closed after the answer', async () => {
    const sent = await sendSlowly('POST', '/v1/budgets', LIMIT * 8);
    expect(sent.status).toBe(413);
    expect(sent.connection).toBe('close');
    expect(JSON.parse(sent.body)).toMatchObject({ error: { code: 'SVC-SYS-9009' } });
  });
});

describe('a body sent slower than the request timeout', () => {
  let slow: RunningControlPlane;
  let slowKey: string;
  beforeAll(async () => {
    slow = await startControlPlane({ http_request_timeout_ms: 1000 });
    slowKey = await tenantWithKey(slow, 'slow');
  });
  afterAll(async () => {
    await slow?.close();
  });

  it('is answered 408 and its connection closed, not held open', async () => {
    const url = new URL(slow.url);
    const socket = connect(Number(url.port), url.hostname);
    await once(socket, 'connect');
    socket.write(
      'POST /v1/envelopes HTTP/1.1\r\nhost: cp\r\ncontent-type: application/json\r\n' +
        `content-length: 1000000\r\nx-api-key: ${slowKey}\r\n\r\n{"budget`,
    );
    // A byte every 200 ms: never idle, never done.
    const trickle = setInterval(() => socket.writable && socket.write(' '), 200);
    let answer = '';
    socket.setEncoding('utf8').on('data', (text: string) => (answer += text));
    const started = Date.now();
    await once(socket, 'close');
    clearInterval(trickle);
    expect(answer).toMatch(/^HTTP\/1\.1 408/);
    expect(Date.now() - started).toBeLessThan(10_000);
  });
});
