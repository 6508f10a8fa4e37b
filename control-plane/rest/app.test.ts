import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createLogger } from '../../core/observability/logger.ts';
import { ApiKeys } from '../auth/api-keys.ts';
import { Authenticator } from '../auth/authenticator.ts';
import { createAuthFailureLimit } from '../auth/auth-failure-limit.ts';
import { createRequestRate } from '../auth/request-rate.ts';
import { ControlPlaneMetrics } from '../observability/metrics.ts';
import { LmdbStorage } from '../storage/lmdb/lmdb-storage.ts';
import { Tenants } from '../tenants/tenants.ts';
import { createApp } from './app.ts';
import { asSvcError, renderError } from './render-error.ts';
import { createRouteTable } from './route.ts';

const ROOT = 'root-administrator-key-for-app-tests';
const dir = mkdtempSync(join(tmpdir(), 'app-'));
const { storage } = await LmdbStorage.open({ path: join(dir, 'storage') });
const tenants = new Tenants(storage);
let log = '';
let app: FastifyInstance;

beforeAll(async () => {
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      log += chunk.toString();
      done();
    },
  });
  const created = await createApp({
    logger: createLogger({ level: 'info', service: 'test', destination }),
    authenticator: new Authenticator(new ApiKeys(storage), null, ROOT, () => new Date(), createAuthFailureLimit(1000)),
    tenants,
    metrics: new ControlPlaneMetrics(),
    bodyLimitBytes: 1024,
    requestTimeoutMs: 30_000,
    requestRate: createRequestRate(1000),
    documentationBase: () => 'http://127.0.0.1:8080',
  });
  app = created.app;
  created.routes.add({
    method: 'GET',
    path: '/boom',
    operationId: 'boom',
    summary: 'throws',
    tag: 'test',
    access: 'authenticated',
    responses: {},
    handler: () => {
      throw new Error('cannot open /srv/svc/data.mdb: EACCES while loading api_key sk-live-abcdefghijklmnop0123');
    },
  });
  created.routes.add({
    method: 'GET',
    path: '/bad',
    operationId: 'bad',
    summary: 'throws an error that looks like a client error',
    tag: 'test',
    access: 'authenticated',
    responses: {},
    handler: () => {
      throw Object.assign(new Error('parser state at /srv/svc/lib/parse.ts:41'), { statusCode: 400 });
    },
  });
  created.routes.add({
    method: 'POST',
    path: '/echo',
    operationId: 'echo',
    summary: 'echoes',
    tag: 'test',
    access: 'authenticated',
    body: z.object({ a: z.number() }),
    responses: {},
    handler: ({ body }) => ({ status: 200, body }),
  });
  await app.ready();
});
afterAll(async () => {
  await app.close();
  await storage.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('errors of the REST surface', () => {
  it('answers a handler that throws a plain Error with a generic 500; the detail is in the log', async () => {
    const res = await app.inject({
      method: 'GET',
      url: '/boom',
      headers: { 'x-api-key': ROOT, 'x-request-id': 'r-1' },
    });
    expect(res.statusCode).toBe(500);
    expect(res.body).not.toMatch(/srv|EACCES|sk-live/);
    expect(res.json()).toMatchObject({
      error: {
        code: 'SVC-SYS-9007',
        message: 'internal error',
        request_id: 'r-1',
        documentation_url: 'http://127.0.0.1:8080/docs/errors/SVC-SYS-9007',
      },
    });
    const line = log.split('\n').find((l) => l.includes('"request_id":"r-1"') && l.includes('request failed'));
    expect(line).toContain('cannot open /srv/svc/data.mdb: EACCES');
    // The key in the message is scrubbed from the log too.
    expect(log).not.toContain('sk-live-abcdefghijklmnop0123');
  });

  it('does not echo the text of a thrown error that carries a 400 status', async () => {
    const res = await app.inject({ method: 'GET', url: '/bad', headers: { 'x-api-key': ROOT } });
    expect(res.body).not.toContain('/srv/svc');
    expect(res.body).not.toContain('parser state');
  });

  it('refuses a body that is not JSON naming the body, without parser internals', async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/echo',
      headers: { 'x-api-key': ROOT, 'content-type': 'application/json' },
      payload: '{"a":',
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatchObject({
      code: 'SVC-SYS-9002',
      details: { field_violations: [{ field: '(body)', description: 'not valid JSON' }] },
    });
  });
});

describe('a route that needs a caller', () => {
  it('never runs its handler without an authenticated principal, whatever the hooks did', async () => {
    const bare = Fastify();
    bare.setErrorHandler((error, request, reply) => {
      const rendered = renderError(asSvcError(error), request.id, new Date(), 'http://127.0.0.1:8080');
      return reply.code(rendered.status).send(rendered.body);
    });
    // An authentication hook that lets everything through: the route must still refuse.
    const routes = createRouteTable(bare, { tenants, authenticate: () => Promise.resolve() });
    let ran = false;
    routes.add({
      method: 'GET',
      path: '/secret',
      operationId: 'secret',
      summary: 'needs a caller',
      tag: 'test',
      access: 'authenticated',
      responses: {},
      handler: ({ caller }) => {
        ran = true;
        return { status: 200, body: { tenant: caller.tenant } };
      },
    });
    const res = await bare.inject({ method: 'GET', url: '/secret' });
    expect(res.statusCode).toBe(401);
    expect(res.json().error.code).toBe('SVC-SYS-9003');
    expect(ran).toBe(false);
    await bare.close();
  });
});
