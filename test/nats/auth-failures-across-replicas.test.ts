import { setTimeout as sleep } from 'node:timers/promises';
import { connect, type NatsConnection } from 'nats';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { subjects } from '../../core/bus/subjects.ts';
import { ROOT_KEY, type RunningControlPlane } from '../harness/control-plane.ts';
import { clockEarlyInAMinute } from '../harness/minute-clock.ts';
import type { NatsServer } from '../harness/nats-server.ts';
import {
  announcement,
  attempts,
  CONTROL_PLANE_USER,
  PROPAGATION_MS,
  PROXY_ACME_USER,
  startTwoReplicas,
  type TwoReplicas,
} from '../harness/replicas-on-nats.ts';

/**
 * Two control-plane replicas (on one PostgreSQL database when the suites run on it) and one
 * nats-server with the tenant-isolation accounts: failed authentications are counted by the
 * fleet, not by the replica that saw them.
 */
const LIMIT = 6;
const WRONG_KEY = 'svc_not-a-key-of-anyone-0000000000000000';

const clock = clockEarlyInAMinute();

let nats: NatsServer;
let a: RunningControlPlane;
let b: RunningControlPlane;
let replicas: TwoReplicas | undefined;

beforeAll(async () => {
  replicas = await startTwoReplicas({ auth_failures_per_minute: LIMIT }, clock);
  ({ nats, a, b } = replicas);
}, 60_000);

afterAll(async () => {
  await Promise.all([...agents.values()].map((agent) => agent.close()));
  await replicas?.close();
});

interface Answer {
  status: number;
  code: string | undefined;
  retryAfter: string | undefined;
}

/** One connection pool per local address requests are sent from. */
const agents = new Map<string, Agent>();

/** GET /v1/tenants on `replica` with `key`, sent from the local address `from` (127.0.0.0/8). */
async function get(replica: RunningControlPlane, from: string, key: string): Promise<Answer> {
  let dispatcher = agents.get(from);
  if (dispatcher === undefined) agents.set(from, (dispatcher = new Agent({ localAddress: from })));
  const answer = await request(new URL('/v1/tenants', replica.url), { headers: { 'x-api-key': key }, dispatcher });
  const body = (await answer.body.json()) as { error?: { code?: string } };
  const retryAfter = answer.headers['retry-after'];
  return {
    status: answer.statusCode,
    code: body.error?.code,
    retryAfter: typeof retryAfter === 'string' ? retryAfter : undefined,
  };
}

describe('failed authentications counted across control-plane replicas', () => {
  it('blocks an address at the limit when its failures were split over both replicas', async () => {
    const from = '127.0.0.11';
    for (let i = 0; i < LIMIT - 1; i++) expect((await get(i % 2 === 0 ? a : b, from, WRONG_KEY)).status).toBe(401);
    await sleep(PROPAGATION_MS);
    // One short of the limit on either replica: a valid credential still passes.
    expect((await get(a, from, ROOT_KEY)).status).toBe(200);
    expect((await get(b, from, ROOT_KEY)).status).toBe(200);

    expect((await get(b, from, WRONG_KEY)).status).toBe(401);
    await sleep(PROPAGATION_MS);
    for (const replica of [a, b]) {
      const refused = await get(replica, from, ROOT_KEY);
      expect(refused).toMatchObject({ status: 429, code: 'SVC-SYS-9005' });
      expect(Number(refused.retryAfter)).toBeGreaterThan(0);
    }
  });

  it('refuses an address blocked on one replica on the other, a valid credential included', async () => {
    const from = '127.0.0.12';
    for (let i = 0; i < LIMIT; i++) expect((await get(a, from, WRONG_KEY)).status).toBe(401);
    expect(await get(a, from, ROOT_KEY)).toMatchObject({ status: 429, code: 'SVC-SYS-9005' });
    await sleep(PROPAGATION_MS);
    expect(await get(b, from, ROOT_KEY)).toMatchObject({ status: 429, code: 'SVC-SYS-9005' });
    // Another address is not held back by it.
    expect((await get(b, '127.0.0.22', ROOT_KEY)).status).toBe(200);
  });

  describe('announcements from other credentials', () => {
    let proxy: NatsConnection;
    let controlPlane: NatsConnection;

    beforeAll(async () => {
      proxy = await connect({ servers: nats.url, ...PROXY_ACME_USER });
      controlPlane = await connect({ servers: nats.url, ...CONTROL_PLANE_USER });
    });
    afterAll(async () => {
      await proxy?.close();
      await controlPlane?.close();
    });

    it("refuses a proxy's credentials to publish or read them, and counts the control plane's", async () => {
      const { published, read } = await attempts(proxy, subjects.authFailures, announcement(clock, '127.0.0.13', 100));
      expect(published).toMatch(/Permissions Violation for Publish/);
      expect(read).toMatch(/Permissions Violation for Subscription/);

      // The same message from the control plane's credentials is counted by both replicas: the
      // forged one would have been.
      controlPlane.publish(subjects.authFailures, announcement(clock, '127.0.0.14', 100));
      await controlPlane.flush();
      await sleep(PROPAGATION_MS);
      for (const replica of [a, b]) {
        expect((await get(replica, '127.0.0.13', ROOT_KEY)).status).toBe(200);
        expect((await get(replica, '127.0.0.14', ROOT_KEY)).status).toBe(429);
      }
    });
  });
});
