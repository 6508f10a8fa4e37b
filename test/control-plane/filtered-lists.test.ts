import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FILTER_SCAN_LIMIT } from '../../control-plane/storage/lmdb/pages.ts';
import { startControlPlane, tenantWithKey, type RunningControlPlane } from '../harness/control-plane.ts';
import { anAuditDraft, anEvent } from '../storage/records.ts';

/**
 * A filter that matches little in a long event log or audit log: one request reads a bounded slice
 * of it (on LMDB, FILTER_SCAN_LIMIT records, read synchronously) and hands back the position
 * reached, so no request walks the whole log while every other request waits.
 */

const TENANT = 'scan-bound';
const COMMON = FILTER_SCAN_LIMIT * 3;

let cp: RunningControlPlane;
let reader: string;
let admin: string;
let rareEventId: string;
const lmdb = () => cp.databaseUrl === null;

beforeAll(async () => {
  cp = await startControlPlane();
  admin = await tenantWithKey(cp, TENANT);
  const key = await cp.call('POST', '/v1/api-keys', { key: admin, body: { name: 'sidecar', scopes: ['events:read'] } });
  reader = key.body.key_secret as string;
  const rare = anEvent(TENANT, { event_type: 'tool.call' });
  rareEventId = rare.event_id;
  const common = Array.from({ length: COMMON }, () => anEvent(TENANT, { event_type: 'llm.call' }));
  await cp.plane.storage.withTransaction(async (t) => {
    await t.events.insertNew(TENANT, [rare, ...common]);
    await t.audit.append(TENANT, anAuditDraft('policy.update'));
    for (let i = 0; i < COMMON; i++) await t.audit.append(TENANT, anAuditDraft('envelope.create'));
  });
}, 60_000);
afterAll(async () => {
  await cp?.close();
});

/** Every page of a REST list from `path` on (after `from` when given), following X-Next-Page-Token. */
async function walk(
  key: string,
  path: string,
  from: string | null = null,
): Promise<{ items: Array<Record<string, unknown>>; requests: number }> {
  const items: Array<Record<string, unknown>> = [];
  let token = from;
  let requests = 0;
  do {
    const res = await cp.call('GET', token === null ? path : `${path}&page_token=${token}`, { key });
    expect(res.status).toBe(200);
    expect(res.body.length).toBeLessThanOrEqual(5);
    items.push(...(res.body as Array<Record<string, unknown>>));
    requests += 1;
    token = res.headers.get('x-next-page-token');
  } while (token !== null);
  return { items, requests };
}

describe('GET /v1/events filtered by a type that matches little', () => {
  it('ends a page at the bound on records read, and the pages after it find every match', async () => {
    const first = await cp.call('GET', '/v1/events?event_type=tool.call&page_size=5', { key: reader });
    expect(first.status).toBe(200);
    if (lmdb()) {
      expect(first.body).toEqual([]);
      expect(first.headers.get('x-next-page-token')).toMatch(/^[A-Za-z0-9_-]+$/);
    }
    const { items, requests } = await walk(reader, '/v1/events?event_type=tool.call&page_size=5');
    expect(items.map((e) => e.event_id)).toEqual([rareEventId]);
    expect(requests).toBeLessThanOrEqual(Math.ceil((COMMON + 1) / FILTER_SCAN_LIMIT) + 1);
    expect((await walk(reader, '/v1/events?event_type=nothing.*&page_size=5')).items).toEqual([]);
  });

  it('answers `limit` with what it found before the bound, and the token to go on', async () => {
    const res = await cp.call('GET', '/v1/events?event_type=tool.call&limit=50', { key: reader });
    expect(res.status).toBe(200);
    if (lmdb()) {
      expect(res.body).toEqual([]);
      const token = res.headers.get('x-next-page-token');
      expect(token).not.toBeNull();
      const { items } = await walk(reader, '/v1/events?event_type=tool.call&page_size=5', token);
      expect(items.map((e) => e.event_id)).toEqual([rareEventId]);
    } else {
      expect(res.body.map((e: { event_id: string }) => e.event_id)).toEqual([rareEventId]);
      expect(res.headers.get('x-next-page-token')).toBeNull();
    }
  });
});

describe('GET /v1/audit filtered by an action that matches little', () => {
  it('ends a page at the bound on records read, and the pages after it find every match', async () => {
    const first = await cp.call('GET', '/v1/audit?action=policy.update&page_size=5', { key: admin });
    expect(first.status).toBe(200);
    if (lmdb()) {
      expect(first.body).toEqual([]);
      expect(first.headers.get('x-next-page-token')).toMatch(/^[A-Za-z0-9_-]+$/);
    }
    const { items } = await walk(admin, '/v1/audit?action=policy.update&page_size=5');
    expect(items.map((r) => r.action)).toEqual(['policy.update']);
  });
});
