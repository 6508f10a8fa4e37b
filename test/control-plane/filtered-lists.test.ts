import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FILTERED_FETCH_LIMIT } from '../../control-plane/storage/filtered-page.ts';
import { FILTER_SCAN_LIMIT } from '../../control-plane/storage/lmdb/pages.ts';
import { MAX_PAGE_SIZE } from '../../control-plane/storage/storage.ts';
import { startControlPlane, tenantWithKey, type RunningControlPlane } from '../harness/control-plane.ts';
import { aCheckpoint, aDetection, anApproval, anAuditDraft, anEnvelope, anEvent } from '../storage/records.ts';

/**
 * A filter that matches little in a long event log, audit log, approval list or evaluation
 * history: one request reads a bounded slice of it (on LMDB, FILTER_SCAN_LIMIT records, read
 * synchronously; a filter the service applies, FILTERED_FETCH_LIMIT storage pages) and hands back
 * the position reached, so no request walks the whole log while every other request waits.
 */

const TENANT = 'scan-bound';
const COMMON = FILTER_SCAN_LIMIT * 3;

let cp: RunningControlPlane;
let reader: string;
let admin: string;
let rareEventId: string;
let policyId: string;
const PENDING_ID = 'ffffffff-ffff-4fff-bfff-ffffffffffff';
/** The one ended envelope, last by id and oldest, among COMMON running ones. */
const COMPLETED_ID = 'ffffffff-ffff-4fff-bfff-fffffffffffe';
let rareDetectionId: string;
/** The one tagged checkpoint, oldest, of its own execution, among COMMON others. */
const rareCheckpoint = aCheckpoint(TENANT, {
  execution_id: 'cp-rare',
  created_at: '2026-01-01T00:00:00.000Z',
  metadata: { ...aCheckpoint(TENANT).metadata, tags: { rare: 'y' } },
});
/** Rows past which a filter the service applies answers a page short. */
const SERVICE_BOUND = FILTERED_FETCH_LIMIT * MAX_PAGE_SIZE;
const lmdb = () => cp.databaseUrl === null;

beforeAll(async () => {
  cp = await startControlPlane();
  admin = await tenantWithKey(cp, TENANT);
  const key = await cp.call('POST', '/v1/api-keys', { key: admin, body: { name: 'sidecar', scopes: ['events:read'] } });
  reader = key.body.key_secret as string;
  const rare = anEvent(TENANT, { event_type: 'tool.call' });
  rareEventId = rare.event_id;
  const common = Array.from({ length: COMMON }, () => anEvent(TENANT, { event_type: 'llm.call' }));
  const policy = await cp.call('POST', '/v1/policies', {
    key: admin,
    body: { name: 'rare', rules: [{ action: 'tool:rare', effect: 'deny' }] },
  });
  policyId = policy.body.policy_id as string;
  const evaluation = (matched: string) => ({
    ...anAuditDraft('policy.evaluate'),
    result: 'deny',
    metadata: { action: 'tool:rare', matched_policy: matched, matched_rule: 'rule-1', shadow: [] },
  });
  await cp.plane.storage.withTransaction(async (t) => {
    await t.events.insertNew(TENANT, [rare, ...common]);
    await t.audit.append(TENANT, anAuditDraft('policy.update'));
    await t.audit.append(TENANT, evaluation(policyId));
    for (let i = 0; i < COMMON; i++) {
      await t.audit.append(TENANT, anAuditDraft('envelope.create'));
      await t.audit.append(TENANT, evaluation('another-policy'));
      await t.approvals.insert(TENANT, { ...anApproval(TENANT), status: 'APPROVED', workflow_id: 'common' });
    }
    await t.approvals.insert(TENANT, { ...anApproval(TENANT), approval_id: PENDING_ID, workflow_id: 'rare' });
    await t.envelopes.insertMany(TENANT, [
      anEnvelope(TENANT, { envelope_id: COMPLETED_ID, status: 'COMPLETED', created_at: '2026-01-01T00:00:00.000Z' }),
      ...Array.from({ length: COMMON }, () => anEnvelope(TENANT, { status: 'RUNNING' })),
    ]);
    const rareDetection = aDetection(TENANT, {
      kind: 'sequence',
      detected_at: '2026-01-01T00:00:00.000Z',
      recorded_at: '2026-01-01T00:00:00.000Z',
    });
    rareDetectionId = rareDetection.detection_id;
    await t.detections.insert(TENANT, rareDetection);
    for (let i = 0; i < COMMON; i++) await t.detections.insert(TENANT, aDetection(TENANT, { kind: 'call_rate' }));
    await t.checkpoints.insert(TENANT, rareCheckpoint, 'given');
    for (let i = 0; i < COMMON; i++)
      await t.checkpoints.insert(TENANT, aCheckpoint(TENANT, { execution_id: `cp-${i}` }), 'given');
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
  most = Number.POSITIVE_INFINITY,
): Promise<{ items: Array<Record<string, unknown>>; requests: number }> {
  const items: Array<Record<string, unknown>> = [];
  let token = from;
  let requests = 0;
  do {
    const res = await cp.call('GET', token === null ? path : `${path}&page_token=${token}`, { key });
    expect(res.status).toBe(200);
    expect(res.body.length).toBeLessThanOrEqual(Number(new URL(path, 'http://x').searchParams.get('page_size')));
    items.push(...(res.body as Array<Record<string, unknown>>));
    requests += 1;
    token = res.headers.get('x-next-page-token');
  } while (token !== null && requests < most);
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

/** Every page of a REST list whose body holds its items under `field` and the next token beside them. */
async function walkObjects(
  key: string,
  path: string,
  field: string,
): Promise<{ pages: Array<Array<Record<string, unknown>>>; items: Array<Record<string, unknown>> }> {
  const pages: Array<Array<Record<string, unknown>>> = [];
  let token: string | null = '';
  do {
    const res = await cp.call('GET', token === '' ? path : `${path}&page_token=${token}`, { key });
    expect(res.status).toBe(200);
    pages.push(res.body[field] as Array<Record<string, unknown>>);
    token = res.body.next_page_token as string | null;
  } while (token !== '' && token !== null);
  return { pages, items: pages.flat() };
}

describe('GET /v1/envelopes filtered by a status that matches little', () => {
  it('ends a page at the bound on records read, and the pages after it find every match', async () => {
    const first = await cp.call('GET', '/v1/envelopes?status=COMPLETED&page_size=5', { key: admin });
    expect(first.status).toBe(200);
    if (lmdb()) {
      expect(first.body).toEqual([]);
      expect(first.headers.get('x-next-page-token')).toMatch(/^[A-Za-z0-9_-]+$/);
    }
    const { items } = await walk(admin, '/v1/envelopes?status=COMPLETED&page_size=5');
    expect(items.map((e) => e.envelope_id)).toEqual([COMPLETED_ID]);
  });

  it('answers `limit` with what it found before the bound, and the token to go on', async () => {
    const res = await cp.call('GET', '/v1/envelopes?status=COMPLETED&limit=50', { key: admin });
    expect(res.status).toBe(200);
    const token = res.headers.get('x-next-page-token');
    const rest = token === null ? [] : (await walk(admin, '/v1/envelopes?status=COMPLETED&page_size=5', token)).items;
    if (lmdb()) expect(res.body).toEqual([]);
    const found = [...(res.body as Array<Record<string, unknown>>), ...rest];
    expect(found.map((e) => e.envelope_id)).toEqual([COMPLETED_ID]);
  });
});

describe('GET /api/v1/traces in a state that matches little', () => {
  it('ends a page at the bound on records read, and the pages after it find every match', async () => {
    const { pages, items } = await walkObjects(admin, '/api/v1/traces?status=COMPLETED&page_size=5', 'traces');
    if (lmdb()) expect(pages[0]).toEqual([]);
    expect(items.map((t) => t.trace_id)).toEqual([COMPLETED_ID]);
  });
});

describe('GET /v1/brain/immune-system/detections of a kind that matches little', () => {
  it('ends a page at the bound on records read, and the pages after it find every match', async () => {
    const path = '/v1/brain/immune-system/detections?kind=sequence&page_size=5';
    const { pages, items } = await walkObjects(reader, path, 'detections');
    if (lmdb()) expect(pages[0]).toEqual([]);
    expect(items.map((d) => d.detection_id)).toEqual([rareDetectionId]);
  });
});

describe('checkpoints queried by a tag that matches little', () => {
  it('ends a page at the bound on records read, and the pages after it find every match', async () => {
    const pages: Array<Array<Record<string, unknown>>> = [];
    let token = '';
    do {
      const res = await cp.call('POST', '/v1/checkpoints:query', {
        key: admin,
        body: { query: { tags: { rare: 'y' } }, page_size: 5, page_token: token },
      });
      expect(res.status).toBe(200);
      pages.push(res.body.checkpoints as Array<Record<string, unknown>>);
      token = res.body.next_page_token as string;
    } while (token !== '');
    if (lmdb()) expect(pages[0]).toEqual([]);
    expect(pages.flat().map((c) => c.checkpoint_id)).toEqual([rareCheckpoint.checkpoint_id]);
  });

  it("lists one execution's checkpoints on the first page however many others the tenant has", async () => {
    const res = await cp.call('GET', '/v1/checkpoints?execution_id=cp-rare&page_size=5', { key: admin });
    expect(res.status).toBe(200);
    expect(res.body.checkpoints.map((c: { checkpoint_id: string }) => c.checkpoint_id)).toEqual([
      rareCheckpoint.checkpoint_id,
    ]);
    expect(res.body.next_page_token).toBe('');
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

describe('GET /v1/approvals', () => {
  it('lists one status from its own index: the pending one at once after thousands decided', async () => {
    const res = await cp.call('GET', '/v1/approvals?status=PENDING&page_size=5', { key: admin });
    expect(res.status).toBe(200);
    expect(res.body.map((a: { approval_id: string }) => a.approval_id)).toEqual([PENDING_ID]);
    expect(res.headers.get('x-next-page-token')).toBeNull();
  });

  it('ends a page filtered by workflow at the bound on approvals read, and the pages after it find every match', async () => {
    const first = await cp.call('GET', '/v1/approvals?workflow_id=rare&page_size=5', { key: admin });
    expect(first.status).toBe(200);
    expect(first.body).toEqual([]);
    expect(first.headers.get('x-next-page-token')).toMatch(/^[A-Za-z0-9_-]+$/);
    const { items, requests } = await walk(admin, '/v1/approvals?workflow_id=rare&page_size=5');
    expect(items.map((a) => a.approval_id)).toEqual([PENDING_ID]);
    expect(requests).toBe(Math.ceil((COMMON + 1) / SERVICE_BOUND));
  });

  it('answers `limit` with what it found before the bound, and the token to go on', async () => {
    const res = await cp.call('GET', '/v1/approvals?workflow_id=rare&limit=50', { key: admin });
    expect(res.status).toBe(200);
    expect(res.body).toEqual([]);
    const token = res.headers.get('x-next-page-token');
    expect(token).not.toBeNull();
    const { items } = await walk(admin, '/v1/approvals?workflow_id=rare&page_size=5', token);
    expect(items.map((a) => a.approval_id)).toEqual([PENDING_ID]);
  });

  it('fills a page from the middle of what storage returned and goes on after its last item', async () => {
    const { items } = await walk(admin, '/v1/approvals?workflow_id=common&page_size=5', null, 3);
    expect(items).toHaveLength(15);
    const all = await walk(admin, '/v1/approvals?page_size=100', null, 1);
    expect(items.map((a) => a.approval_id)).toEqual(all.items.slice(0, 15).map((a) => a.approval_id));
  });
});

describe("a policy's evaluation history among many other evaluations", () => {
  it('ends a page at the bound on records read, and the pages after it find every match', async () => {
    const pages: Array<Array<Record<string, unknown>>> = [];
    let token = '';
    do {
      const res = await cp.call(
        'GET',
        `/v1/policies/${policyId}/evaluations?page_size=5${token === '' ? '' : `&page_token=${token}`}`,
        { key: admin },
      );
      expect(res.status).toBe(200);
      pages.push(res.body.evaluations as Array<Record<string, unknown>>);
      token = res.body.next_page_token as string;
    } while (token !== '');
    expect(pages[0]).toEqual([]);
    expect(pages.flat().map((e) => [e.policy_id, e.action, e.decision])).toEqual([
      [policyId, 'tool:rare', 'EVALUATION_DECISION_DENY'],
    ]);
    expect(pages).toHaveLength(Math.ceil((COMMON + 1) / SERVICE_BOUND));
  });

  it("refuses another list's token as a position in the history", async () => {
    const approvals = await cp.call('GET', '/v1/approvals?workflow_id=rare&page_size=5', { key: admin });
    const foreign = approvals.headers.get('x-next-page-token')!;
    const res = await cp.call('GET', `/v1/policies/${policyId}/evaluations?page_token=${foreign}`, { key: admin });
    expect(res.status).toBe(400);
    expect(JSON.stringify(res.body)).toContain('page_token');
  });
});
