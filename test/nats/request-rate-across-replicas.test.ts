import { setTimeout as sleep } from 'node:timers/promises';
import { status } from '@grpc/grpc-js';
import { connect, type NatsConnection } from 'nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadServedDefinition } from '../../control-plane/grpc/contracts.ts';
import { decodePayload } from '../../core/bus/codec.ts';
import { subjects } from '../../core/bus/subjects.ts';
import { eventually, ROOT_KEY, type RunningControlPlane } from '../harness/control-plane.ts';
import { clientsFor, failure, statusDetails, unary, type Clients } from '../harness/grpc.ts';
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
 * nats-server with the tenant-isolation accounts: a credential's requests are counted by the
 * fleet, not by the replica that served them. The bootstrap key is the credential both replicas
 * know on LMDB too, and nothing else of the suite uses it.
 */
const LIMIT = 8;
const COSTS = 'svc.cost.v1.CostService';

const clock = clockEarlyInAMinute();

let nats: NatsServer;
let a: RunningControlPlane;
let b: RunningControlPlane;
let replicas: TwoReplicas | undefined;
let grpcOfB: Clients;
/** The control plane's credentials, listening to what the replicas announce. */
let listener: NatsConnection;
const announced: unknown[] = [];

beforeAll(async () => {
  replicas = await startTwoReplicas({ rate_limit_per_minute: LIMIT }, clock);
  ({ nats, a, b } = replicas);
  grpcOfB = clientsFor(loadServedDefinition(), `127.0.0.1:${String(b.plane.grpcPort())}`);
  listener = await connect({ servers: nats.url, ...CONTROL_PLANE_USER });
  listener.subscribe(subjects.requestCounts, {
    callback: (_error, msg) => void announced.push(decodePayload(msg.data)),
  });
  await listener.flush();
}, 60_000);

afterAll(async () => {
  grpcOfB?.close();
  await listener?.close();
  await replicas?.close();
});

const overRest = (replica: RunningControlPlane) => replica.call('GET', '/v1/tenants');
const overGrpc = () => unary(grpcOfB.client(COSTS), 'ListBudgets', {}, { defaultKey: ROOT_KEY });

describe('the request rate counted across control-plane replicas', () => {
  it("refuses a credential at the limit when its requests were split over both replicas' REST and gRPC", async () => {
    for (let i = 0; i < LIMIT / 2; i++) expect((await overRest(a)).status).toBe(200);
    for (let i = 0; i < LIMIT / 2 - 1; i++) await overGrpc();
    await sleep(PROPAGATION_MS);
    // One short of the limit in the fleet: each replica served half, and still one passes.
    const last = await overRest(b);
    expect(last.status).toBe(200);
    expect(last.headers.get('x-ratelimit-remaining')).toBe('0');
    await sleep(PROPAGATION_MS);

    const refused = await overRest(a);
    expect(refused.status).toBe(429);
    expect((refused.body as { error: { code: string } }).error.code).toBe('SVC-SYS-9005');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(refused.headers.get('x-ratelimit-limit')).toBe(String(LIMIT));
    const refusedOverGrpc = await failure(overGrpc());
    expect(refusedOverGrpc.code).toBe(status.RESOURCE_EXHAUSTED);
    expect(statusDetails(refusedOverGrpc).errorInfo).toMatchObject({ reason: 'SVC-SYS-9005' });

    // What went over NATS: the credential's key and counts, a refused request in none of them.
    const counted = announced.flatMap(
      (announcement) => (announcement as { counts: Array<{ key: string; count: number }> }).counts,
    );
    expect(counted.every(({ key }) => key === 'bootstrap:system:bootstrap-admin')).toBe(true);
    expect(counted.reduce((sum, { count }) => sum + count, 0)).toBe(LIMIT);
  });

  describe('announcements from other credentials', () => {
    let proxy: NatsConnection;

    beforeAll(async () => {
      proxy = await connect({ servers: nats.url, ...PROXY_ACME_USER });
    });
    afterAll(async () => {
      await proxy?.close();
    });

    it("refuses a proxy's credentials to publish or read them", async () => {
      const { published, read } = await attempts(
        proxy,
        subjects.requestCounts,
        announcement(clock, 'api_key:acme:someone-else', 1_000),
      );
      expect(published).toMatch(/Permissions Violation for Publish/);
      expect(read).toMatch(/Permissions Violation for Subscription/);
    });
  });

  it('counts in svc_announcements_lost_total what it could not announce while NATS was away', async () => {
    await nats.stop();
    try {
      await eventually(
        () => a.messaging.healthy(),
        (healthy) => !healthy,
        10_000,
      );
      // A failed authentication is counted, and its announcement not sent.
      expect((await a.call('GET', '/v1/tenants', { key: 'svc_not-a-key-of-anyone-0000000000000000' })).status).toBe(
        401,
      );
      const lost = () =>
        a.call('GET', '/metrics', { key: null }).then(({ body }) => String(body).match(LOST_NOT_SENT)?.[1]);
      expect(await eventually(lost, (count) => count !== undefined)).toBe('1');
    } finally {
      await nats.restart();
    }
  });
});

const LOST_NOT_SENT = /^svc_announcements_lost_total\{subject="svc\.system\.auth-failures",reason="not_sent"\} (\d+)$/m;
