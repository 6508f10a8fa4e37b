import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Registry } from 'prom-client';
import type { BusLogger, Messaging } from '../../core/bus/bus.ts';
import { createMemoryMessaging } from '../../core/bus/memory-messaging.ts';
import { SvcError } from '../../core/errors/index.ts';
import type { EvaluationResult } from '../../core/policy/index.ts';
import { syncSubjects, type ApprovalHoldRequest, type ApprovalStanding } from '../../core/sync/contract.ts';
import type { GateVerdict } from '../governance/policy-gate.ts';
import { createApprovalMetrics, type ApprovalMetrics } from '../metrics/index.ts';
import { HeldBytes } from '../holds/index.ts';
import { ApprovalHolds, type ApprovalHoldOptions } from './approval-holds.ts';
import { MAX_CONTEXT_VALUE_BYTES } from './held-context.ts';

const silent: BusLogger = { warn: () => undefined, error: () => undefined };
const result: EvaluationResult = {
  decision: 'REQUIRE_APPROVAL',
  allowed: false,
  effect: 'deny',
  matched_policy: 'p-1',
  matched_policy_name: 'hitl',
  matched_rule: 'r-1',
  matched_action: 'llm:gpt-4o',
  enforcement: 'BLOCK',
  reason: 'approval required by hitl',
  message: 'big models need a human',
  warnings: [],
  shadow: [],
  evaluation_time_ms: 0,
};
const verdict: GateVerdict = {
  allowed: false,
  result,
  code: 'SVC-POL-2004',
  message: 'llm:gpt-4o: big models need a human',
  terminate: false,
};

let messaging: Messaging;
let metrics: ApprovalMetrics;
let registry: Registry;
/** The control plane's side: approvals by id, and every request it answered. */
let store: Map<string, ApprovalStanding>;
let asked: ApprovalHoldRequest[];

beforeEach(() => {
  messaging = createMemoryMessaging({ logger: silent });
  registry = new Registry();
  metrics = createApprovalMetrics(registry);
  store = new Map();
  asked = [];
});
afterEach(async () => messaging.close());

async function controlPlane(): Promise<void> {
  await messaging.requests.reply('svc.*.approvals.request', (data) => {
    const request = data as ApprovalHoldRequest;
    asked.push(request);
    const standing = store.get(request.approval_id) ?? {
      tenant_id: request.tenant_id,
      approval_id: request.approval_id,
      status: 'PENDING' as const,
      reviewer_id: null,
      review_note: null,
    };
    store.set(request.approval_id, standing);
    return Promise.resolve(standing);
  });
}

function holds(options: Partial<ApprovalHoldOptions> = {}, logger = silent): ApprovalHolds {
  return new ApprovalHolds(
    {
      tenantId: 'acme',
      requestedBy: { type: 'proxy', id: 'proxy:test' },
      timeoutMs: 5_000,
      maxHeld: 10,
      opensPerMinute: 60,
      recheckMs: 100,
      ...options,
    },
    messaging,
    metrics,
    logger,
    new HeldBytes(1024 * 1024),
  );
}

async function pendingId(): Promise<string> {
  for (let i = 0; i < 200 && store.size === 0; i++) await new Promise((r) => setTimeout(r, 10));
  const id = [...store.keys()][0];
  if (id === undefined) throw new Error('no approval opened');
  return id;
}

function decide(id: string, status: 'APPROVED' | 'REJECTED', note: string | null = null): ApprovalStanding {
  const decided: ApprovalStanding = { ...store.get(id)!, status, reviewer_id: 'alice', review_note: note };
  store.set(id, decided);
  return decided;
}

async function outcomes(): Promise<Record<string, number>> {
  const metric = await registry.getSingleMetric('svc_proxy_approval_holds_total')!.get();
  return Object.fromEntries(metric.values.map((v) => [String(v.labels.outcome), v.value]));
}

async function heldNow(): Promise<number> {
  return (await registry.getSingleMetric('svc_proxy_approval_held')!.get()).values[0]?.value ?? 0;
}

describe('ApprovalHolds', () => {
  it('opens the approval with what the call is and why, and releases the call on the decision signal', async () => {
    await controlPlane();
    const h = holds();
    const subscription = await h.listen();
    const context = { model: 'gpt-4o', envelope_id: 'env-1', tool_args: 'x'.repeat(MAX_CONTEXT_VALUE_BYTES + 1) };
    const waiting = h.await('llm:gpt-4o', context, verdict, new AbortController().signal, 100);
    const id = await pendingId();
    expect(asked[0]).toMatchObject({
      tenant_id: 'acme',
      approval_id: id,
      requested_by: { type: 'proxy', id: 'proxy:test' },
      action: 'llm:gpt-4o',
      envelope_id: 'env-1',
      policy_id: 'p-1',
      rule_id: 'r-1',
      reason: 'big models need a human',
      context: { model: 'gpt-4o', envelope_id: 'env-1', tool_args: `[${MAX_CONTEXT_VALUE_BYTES + 3} bytes, not kept]` },
    });
    expect(h.size).toBe(1);
    expect(await heldNow()).toBe(1);
    await messaging.signals.publishSignal(syncSubjects.approvalDecided('acme'), decide(id, 'APPROVED'));
    const released = await waiting;
    expect(released).toMatchObject({ allowed: true, terminate: false });
    expect(released.message).toContain(id);
    expect(h.size).toBe(0);
    expect(await heldNow()).toBe(0);
    expect(await outcomes()).toEqual({ approved: 1 });
    await subscription.unsubscribe();
  });

  it('refuses a rejected call with SVC-POL-2004 naming the approval and the note', async () => {
    await controlPlane();
    const h = holds();
    await h.listen();
    const waiting = h.await('llm:gpt-4o', {}, verdict, new AbortController().signal, 100);
    const id = await pendingId();
    await messaging.signals.publishSignal(syncSubjects.approvalDecided('acme'), decide(id, 'REJECTED', 'too costly'));
    const refused = await waiting;
    expect(refused).toMatchObject({ allowed: false, code: 'SVC-POL-2004' });
    expect(refused.message).toBe(`llm:gpt-4o: approval ${id} was rejected by alice: too costly`);
  });

  it('ignores a signal of another tenant and one that does not parse', async () => {
    await controlPlane();
    const h = holds({ timeoutMs: 400, recheckMs: 10_000 });
    await h.listen();
    const waiting = h.await('llm:gpt-4o', {}, verdict, new AbortController().signal, 100);
    const id = await pendingId();
    await messaging.signals.publishSignal(syncSubjects.approvalDecided('acme'), { approval_id: id });
    await messaging.signals.publishSignal(syncSubjects.approvalDecided('acme'), {
      ...decide(id, 'APPROVED'),
      tenant_id: 'globex',
    });
    expect((await waiting).code).toBe('SVC-POL-2004');
  });

  it('refuses a call not decided in time with SVC-POL-2004 and its approval id', async () => {
    await controlPlane();
    const h = holds({ timeoutMs: 300 });
    const started = Date.now();
    const refused = await h.await('llm:gpt-4o', {}, verdict, new AbortController().signal, 100);
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    const id = await pendingId();
    expect(refused).toMatchObject({ allowed: false, code: 'SVC-POL-2004' });
    expect(refused.message).toBe(
      `llm:gpt-4o: approval ${id} was not decided within 0.3 s (proxy_approval_timeout_seconds): big models need a human`,
    );
    expect(await outcomes()).toEqual({ timed_out: 1 });
    expect(h.size).toBe(0);
    // The control plane is told, under the same id, that nobody waits for the decision any more.
    for (let i = 0; i < 100 && asked.at(-1)?.withdrawn === undefined; i++) await new Promise((r) => setTimeout(r, 10));
    expect(asked.at(-1)).toMatchObject({
      approval_id: id,
      withdrawn: expect.stringContaining('not decided within 0.3 s'),
    });
  });

  it('sends the withdrawal again until the control plane, away when the hold ended, hears it', async () => {
    // The control plane answers the opening, then is away (unavailable) while the hold times out.
    let away = false;
    await messaging.requests.reply('svc.*.approvals.request', (data) => {
      if (away) return Promise.reject(new SvcError('SVC-SYS-9001', 'the control plane is restarting'));
      const request = data as ApprovalHoldRequest;
      asked.push(request);
      store.set(request.approval_id, { ...request, status: 'PENDING', reviewer_id: null, review_note: null });
      return Promise.resolve(store.get(request.approval_id));
    });
    const h = holds({ timeoutMs: 300, recheckMs: 100 });
    const waiting = h.await('llm:gpt-4o', {}, verdict, new AbortController().signal, 100);
    const id = await pendingId();
    away = true;
    expect((await waiting).code).toBe('SVC-POL-2004');
    await new Promise((r) => setTimeout(r, 250));
    expect(asked.some((a) => a.withdrawn !== undefined)).toBe(false);
    away = false;
    for (let i = 0; i < 200 && !asked.some((a) => a.withdrawn !== undefined); i++) {
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(asked.filter((a) => a.withdrawn !== undefined)).toEqual([
      expect.objectContaining({ approval_id: id, withdrawn: expect.stringContaining('not decided within 0.3 s') }),
    ]);
    await h.close();
  });

  it('stops sending a withdrawal the control plane refuses for good', async () => {
    let withdrawals = 0;
    await messaging.requests.reply('svc.*.approvals.request', (data) => {
      const request = data as ApprovalHoldRequest;
      if (request.withdrawn === undefined)
        return Promise.resolve({ ...request, status: 'PENDING', reviewer_id: null, review_note: null });
      withdrawals++;
      return Promise.reject(new SvcError('SVC-SYS-9002', 'invalid approval hold request: withdrawn: too long'));
    });
    const h = holds({ timeoutMs: 200, recheckMs: 100 });
    expect((await h.await('llm:gpt-4o', {}, verdict, new AbortController().signal, 100)).code).toBe('SVC-POL-2004');
    await new Promise((r) => setTimeout(r, 500));
    expect(withdrawals).toBe(1);
  });

  it('sends the withdrawals of the calls a shutdown refuses before close resolves', async () => {
    await controlPlane();
    const h = holds({ recheckMs: 10_000 });
    const waiting = h.await('llm:gpt-4o', {}, verdict, new AbortController().signal, 100);
    const id = await pendingId();
    await h.close();
    expect((await waiting).code).toBe('SVC-SYS-9001');
    expect(asked.filter((a) => a.withdrawn !== undefined)).toEqual([
      expect.objectContaining({ approval_id: id, withdrawn: expect.stringContaining('shut down') }),
    ]);
  });

  it('finds a decision whose signal it missed by asking again under the same id', async () => {
    await controlPlane();
    const h = holds({ recheckMs: 100 });
    // Not listening: the decision reaches it only through the re-check.
    const waiting = h.await('llm:gpt-4o', {}, verdict, new AbortController().signal, 100);
    const id = await pendingId();
    decide(id, 'APPROVED');
    expect((await waiting).allowed).toBe(true);
    expect(asked.length).toBeGreaterThanOrEqual(2);
    expect(new Set(asked.map((a) => a.approval_id))).toEqual(new Set([id]));
    expect(store.size).toBe(1);
  });

  it('keeps asking while the control plane does not answer (logging it once), and opens the approval once it does', async () => {
    const warnings: string[] = [];
    const h = holds({ recheckMs: 100 }, { ...silent, warn: (_object, message: string) => void warnings.push(message) });
    await h.listen();
    const waiting = h.await('llm:gpt-4o', {}, verdict, new AbortController().signal, 100);
    await new Promise((r) => setTimeout(r, 350));
    expect(store.size).toBe(0);
    expect(warnings).toEqual(['approval hold request unanswered; asking again every recheck']);
    await controlPlane();
    const id = await pendingId();
    await messaging.signals.publishSignal(syncSubjects.approvalDecided('acme'), decide(id, 'APPROVED'));
    expect((await waiting).allowed).toBe(true);
  });

  it('ends the hold at once, fail closed, when the control plane refuses the request for good', async () => {
    await messaging.requests.reply('svc.*.approvals.request', () =>
      Promise.reject(new SvcError('SVC-SYS-9002', 'invalid approval hold request: action: too long')),
    );
    const refused = await holds().await('llm:gpt-4o', {}, verdict, new AbortController().signal, 100);
    expect(refused).toMatchObject({ allowed: false, code: 'SVC-SYS-9002' });
    expect(refused.message).toContain('could not be opened: invalid approval hold request');
    expect(await outcomes()).toEqual({ failed: 1 });
  });

  it('refuses a call over the bound at once with SVC-SYS-9005, opening no approval for it', async () => {
    await controlPlane();
    const h = holds({ maxHeld: 1 });
    await h.listen();
    const first = h.await('llm:gpt-4o', {}, verdict, new AbortController().signal, 100);
    const id = await pendingId();
    const over = await h.await('llm:gpt-4o', {}, verdict, new AbortController().signal, 100);
    expect(over).toMatchObject({ allowed: false, code: 'SVC-SYS-9005' });
    expect(over.message).toContain('proxy_approval_max_held');
    expect(new Set(asked.map((a) => a.approval_id))).toEqual(new Set([id]));
    await messaging.signals.publishSignal(syncSubjects.approvalDecided('acme'), decide(id, 'APPROVED'));
    expect((await first).allowed).toBe(true);
    expect(await outcomes()).toEqual({ full: 1, approved: 1 });
  });

  it('opens at most opensPerMinute approvals a minute, however soon their calls end, and refuses the next at once', async () => {
    await controlPlane();
    const h = holds({ opensPerMinute: 3 });
    for (let i = 0; i < 3; i++) {
      const client = new AbortController();
      const waiting = h.await('llm:gpt-4o', {}, verdict, client.signal, 100);
      await pendingId();
      client.abort();
      expect((await waiting).allowed).toBe(false);
      store.clear();
    }
    const opened = new Set(asked.map((a) => a.approval_id)).size;
    const over = await h.await('llm:gpt-4o', {}, verdict, new AbortController().signal, 100);
    expect(over).toMatchObject({ allowed: false, code: 'SVC-SYS-9005' });
    expect(over.message).toContain('proxy_approval_opens_per_minute');
    expect(new Set(asked.map((a) => a.approval_id)).size).toBe(opened);
    expect(opened).toBe(3);
  });

  it('frees the place of a call whose client left', async () => {
    await controlPlane();
    const h = holds({ maxHeld: 1 });
    const client = new AbortController();
    const waiting = h.await('llm:gpt-4o', {}, verdict, client.signal, 100);
    await pendingId();
    client.abort();
    expect((await waiting).allowed).toBe(false);
    expect(h.size).toBe(0);
    expect(await outcomes()).toEqual({ cancelled: 1 });
  });

  it('refuses every held call at shutdown with SVC-SYS-9001, and holds none after', async () => {
    await controlPlane();
    const h = holds();
    const waiting = [1, 2].map(() => h.await('llm:gpt-4o', {}, verdict, new AbortController().signal, 100));
    await pendingId();
    await h.close();
    for (const refused of await Promise.all(waiting)) {
      expect(refused).toMatchObject({ allowed: false, code: 'SVC-SYS-9001' });
      expect(refused.message).toMatch(/shut down while approval \S+ was pending/);
    }
    const after = await h.await('llm:gpt-4o', {}, verdict, new AbortController().signal, 100);
    expect(after).toMatchObject({ allowed: false, code: 'SVC-SYS-9001' });
    expect(await outcomes()).toEqual({ shutdown: 3 });
    expect(h.size).toBe(0);
  });
});
