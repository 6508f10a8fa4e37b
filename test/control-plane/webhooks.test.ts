import { createHmac } from 'node:crypto';
import type { LookupAddress } from 'node:dns';
import { mkdtempSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo, LookupFunction } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { createMemoryMessaging } from '../../core/bus/memory-messaging.ts';
import { loadConfig } from '../../core/config/load.ts';
import type { Config } from '../../core/config/schema.ts';
import { loadPriceTable } from '../../core/metering/prices.ts';
import { createLogger } from '../../core/observability/logger.ts';
import { createControlPlane, type ControlPlane } from '../../control-plane/create-control-plane.ts';
import { createPricer } from '../../control-plane/usage/pricer.ts';

const ROOT = 'root-administrator-key-for-webhook-tests';
const HOOK_HOST = 'hooks.example.test';

/** A receiver on loopback that records what reaches it: the SSRF tests assert it stays empty. */
interface Receiver {
  port: number;
  received: Array<{ headers: IncomingMessage['headers']; body: string; path: string }>;
  close(): Promise<void>;
}

async function receiver(
  answer: (req: IncomingMessage) => { status: number; headers?: Record<string, string> } = () => ({ status: 204 }),
): Promise<Receiver> {
  const received: Receiver['received'] = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      received.push({ headers: req.headers, body, path: req.url ?? '' });
      const { status, headers } = answer(req);
      res.writeHead(status, headers).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as AddressInfo).port,
    received,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

/** Name resolution of the deliveries: `hooks.example.test` answers with `addresses`, as a DNS server under an attacker's control could. */
const resolving =
  (addresses: string[]): LookupFunction =>
  (host, _options, callback) => {
    if (host !== HOOK_HOST)
      return callback(Object.assign(new Error(`ENOTFOUND ${host}`), { code: 'ENOTFOUND' }), '', 0);
    (callback as unknown as (e: null, a: LookupAddress[]) => void)(
      null,
      addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 })),
    );
  };

interface Plane {
  plane: ControlPlane;
  url: string;
  log: () => string;
  /** As the root administrator acting for acme, unless another key is given. */
  call(method: string, path: string, body?: unknown, key?: string): Promise<{ status: number; body: any }>;
  close(): Promise<void>;
}

const open: Plane[] = [];
const servers: Receiver[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((p) => p.close()));
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function start(overrides: Partial<Record<keyof Config, unknown>>, addresses: string[]): Promise<Plane> {
  let log = '';
  const destination = new Writable({
    write(chunk: Buffer, _e, done) {
      log += chunk.toString();
      done();
    },
  });
  const config = loadConfig(
    {},
    {
      data_dir: mkdtempSync(join(tmpdir(), 'cp-hooks-')),
      http_host: '127.0.0.1',
      http_port: 0,
      grpc_port: 0,
      bootstrap_admin_key: ROOT,
      webhook_max_attempts: 2,
      ...overrides,
    },
  );
  const logger = createLogger({ level: 'info', service: 'control-plane', destination });
  const messaging = createMemoryMessaging({ logger });
  const plane = await createControlPlane({
    config,
    logger,
    messaging,
    pricer: createPricer(loadPriceTable()),
    resolve: resolving(addresses),
  });
  const url = await plane.listen();
  const running: Plane = {
    plane,
    url,
    log: () => log,
    async call(method, path, body, key = ROOT) {
      const res = await fetch(url + path, {
        method,
        headers: {
          'x-api-key': key,
          ...(key === ROOT && path !== '/v1/tenants' ? { 'x-tenant-id': 'acme' } : {}),
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const text = await res.text();
      return { status: res.status, body: text === '' ? null : JSON.parse(text) };
    },
    async close() {
      await plane.close();
      await messaging.close();
    },
  };
  open.push(running);
  return running;
}

/**
 * Creates tenant acme (returning its webhook secret), a budget whose 50 % and 90 % alerts call
 * `hook`, and spends past 50 %; waits until `done` holds (by default: the log speaks of a webhook).
 */
async function alertTo(
  cp: Plane,
  hook: string,
  done: () => boolean = () => cp.log().includes('webhook'),
): Promise<{ secret: string; create: { status: number; body: any } }> {
  const tenant = await cp.call('POST', '/v1/tenants', { tenant_id: 'acme', name: 'acme' });
  const secret = (tenant.body?.webhook_secret ?? '') as string;
  const create = await cp.call('POST', '/v1/budgets', {
    tenant_id: 'acme',
    name: 'team',
    type: 'cost',
    limits: { max_cost_usd: 1 },
    alerts: [
      { percent: 50, action: 'notify', webhook_url: hook },
      { percent: 90, action: 'notify', webhook_url: hook },
    ],
  });
  if (create.status !== 201) return { secret, create };
  const envelope = await cp.call('POST', '/v1/envelopes', {
    tenant_id: 'acme',
    budget_id: create.body.budget_id,
    adapter_type: 'custom',
  });
  const ev = await cp.call('POST', `/v1/envelopes/${envelope.body.envelope_id}/events`, {
    event_type: 'llm.call',
    timestamp: new Date().toISOString(),
    cost_usd: 0.6,
  });
  expect(ev.status).toBe(202);
  // The alert fires when the event processor applies the event; then its delivery runs.
  for (let i = 0; i < 100 && !done(); i++) {
    await cp.plane.webhooks.idle();
    await new Promise((r) => setTimeout(r, 50));
  }
  await cp.plane.webhooks.idle();
  return { secret, create };
}

describe('webhook URLs on create', () => {
  it.each([
    ['http://hooks.example.com/x', 'https'],
    ['https://127.0.0.1/x', 'private'],
    ['https://169.254.169.254/latest/meta-data/iam', 'link-local'],
    ['https://[fd00:ec2::254]/x', 'link-local'],
    ['https://[::ffff:127.0.0.1]/x', 'loopback'],
    ['https://localhost/x', 'local'],
  ])('refuses %s with 400 naming the field, and stores nothing', async (hook, words) => {
    const cp = await start({}, []);
    await cp.call('POST', '/v1/tenants', { tenant_id: 'acme', name: 'acme' });
    const res = await cp.call('POST', '/v1/budgets', {
      name: 'team',
      type: 'cost',
      limits: { max_cost_usd: 1 },
      alerts: [
        { percent: 80, action: 'warn' },
        { percent: 90, action: 'notify', webhook_url: hook },
      ],
    });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('SVC-SYS-9002');
    expect(res.body.error.details.field_violations[0].field).toBe('alerts.1.webhook_url');
    expect(res.body.error.details.field_violations[0].description).toMatch(new RegExp(words.split(' ')[0]!));
    expect((await cp.call('GET', '/v1/budgets')).body).toEqual([]);
  });
});

describe('webhook deliveries', () => {
  it('never reach a loopback server a host name resolves to, and log the URL without its secrets', async () => {
    const target = await receiver();
    servers.push(target);
    const cp = await start({ webhook_allow_http: true }, ['127.0.0.1']);
    const hook = `http://alice:pw-in-url-123@${HOOK_HOST}:${target.port}/hook?token=query-secret-456`;
    const { create } = await alertTo(cp, hook);
    expect(create.status).toBe(201);
    expect(target.received).toEqual([]);
    expect(cp.log()).toContain('webhook target refused; not sent');
    expect(cp.log()).toContain(`"url":"http://${HOOK_HOST}:${target.port}/hook"`);
    expect(cp.log()).not.toContain('pw-in-url-123');
    expect(cp.log()).not.toContain('query-secret-456');
  });

  it('never reach a loopback server among several addresses of one name', async () => {
    const target = await receiver();
    servers.push(target);
    const cp = await start({ webhook_allow_http: true }, ['93.184.216.34', '127.0.0.1']);
    await alertTo(cp, `http://${HOOK_HOST}:${target.port}/hook`);
    expect(target.received).toEqual([]);
    expect(cp.log()).toContain('webhook target refused; not sent');
  });

  it('reach an allow-listed address, connected to the address checked, signed with the tenant key; rotation signs with both', async () => {
    const target = await receiver();
    servers.push(target);
    const cp = await start({ webhook_allow_http: true, webhook_allowed_hosts: '127.0.0.0/8' }, ['127.0.0.1']);
    const { secret } = await alertTo(cp, `http://${HOOK_HOST}:${target.port}/hook`, () => target.received.length > 0);
    expect(secret).toMatch(/^whsec_/);
    expect(target.received).toHaveLength(1);
    const [delivery] = target.received;
    expect(delivery!.headers.host).toBe(`${HOOK_HOST}:${target.port}`);
    const sign = (key: string) =>
      `sha256=${createHmac('sha256', key)
        .update(`${String(delivery!.headers['x-svc-timestamp'])}.${delivery!.body}`)
        .digest('hex')}`;
    expect(delivery!.headers['x-svc-signature']).toBe(sign(secret));

    // The tenant's own administrator rotates its key.
    const key = await cp.call('POST', '/v1/api-keys', { tenant_id: 'acme', name: 'admin', scopes: ['admin'] });
    const acme = await cp.call('POST', '/v1/webhook-secret/rotate', undefined, key.body.key_secret);
    expect(acme.body).toMatchObject({ tenant_id: 'acme', webhook_secret: expect.stringMatching(/^whsec_/) });
    expect(acme.body.webhook_secret).not.toBe(secret);
    expect(Date.parse(acme.body.previous_valid_until)).toBeGreaterThan(Date.now());
    expect(cp.log()).not.toContain(acme.body.webhook_secret);

    const budgetId = (await cp.call('GET', '/v1/budgets?tenant_id=acme')).body[0].budget_id;
    const envelope = await cp.call('POST', '/v1/envelopes', {
      tenant_id: 'acme',
      budget_id: budgetId,
      adapter_type: 'custom',
    });
    await cp.call('POST', `/v1/envelopes/${envelope.body.envelope_id}/events`, {
      event_type: 'llm.call',
      timestamp: new Date().toISOString(),
      cost_usd: 0.35,
    });
    for (let i = 0; i < 100 && target.received.length < 2; i++) await new Promise((r) => setTimeout(r, 50));
    await cp.plane.webhooks.idle();
    const second = target.received[1]!;
    const signAgain = (k: string) =>
      `sha256=${createHmac('sha256', k)
        .update(`${String(second.headers['x-svc-timestamp'])}.${second.body}`)
        .digest('hex')}`;
    expect(second.headers['x-svc-signature']).toBe(`${signAgain(acme.body.webhook_secret)},${signAgain(secret)}`);
  });

  it('do not follow a redirect, and do not retry it', async () => {
    const elsewhere = await receiver();
    servers.push(elsewhere);
    const redirecting = await receiver(() => ({
      status: 302,
      headers: { location: `http://127.0.0.1:${elsewhere.port}/internal` },
    }));
    servers.push(redirecting);
    const cp = await start({ webhook_allow_http: true, webhook_allowed_hosts: '127.0.0.0/8' }, ['127.0.0.1']);
    await alertTo(cp, `http://${HOOK_HOST}:${redirecting.port}/hook`, () => cp.log().includes('redirect'));
    expect(redirecting.received).toHaveLength(1);
    expect(elsewhere.received).toEqual([]);
    expect(cp.log()).toContain('redirect not followed');
  });
});
