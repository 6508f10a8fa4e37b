import { describe, expect, it } from 'vitest';
import { isSvcError } from '../../core/errors/index.ts';
import { EnvelopeRegistry } from './envelope-registry.ts';

const registry = () =>
  new EnvelopeRegistry({
    defaultBudgetId: 'default-budget',
    allowedBudgetIds: ['b2', 'b3'],
    podExecutionId: 'pod-1',
    maxEntries: 3,
  });

function refusal(run: () => unknown): unknown {
  try {
    run();
  } catch (error) {
    return error;
  }
  return undefined;
}

const REST_ENVELOPE = '0b9f1c1e-4a5d-4c36-9a53-2f3f5c7e9d10';

describe('EnvelopeRegistry', () => {
  it('refuses with SVC-SYS-9002 an envelope id that is not a UUID and an execution id that could not be stored', () => {
    const r = registry();
    for (const [headers, field] of [
      [{ 'x-svc-envelope-id': 'env-rest' }, 'X-Svc-Envelope-Id'],
      [{ 'x-svc-execution-id': 'x'.repeat(201) }, 'X-Svc-Execution-Id'],
    ] as const) {
      const error = refusal(() => r.resolve(headers));
      expect(isSvcError(error) && error.code).toBe('SVC-SYS-9002');
      expect(isSvcError(error) && error.fieldViolations[0]?.field).toBe(field);
    }
    expect(r.resolve({ 'x-svc-execution-id': 'x'.repeat(200) }).opened).toBe(true);
  });

  it('opens one envelope per execution on first sight and reuses it; the budget header picks the budget of a new one only', () => {
    const r = registry();
    const first = r.resolve({ 'x-svc-execution-id': 'e1', 'x-svc-budget-id': 'b2' });
    expect(first.opened).toBe(true);
    expect(first.envelope.budgetId).toBe('b2');
    const again = r.resolve({ 'x-svc-execution-id': 'e1', 'x-svc-budget-id': 'b2' });
    expect(again).toEqual({ envelope: first.envelope, opened: false });
    expect(r.resolve({ 'x-svc-execution-id': 'e1' }).envelope).toBe(first.envelope);
  });

  it('refuses with SVC-SYS-9002 a budget header that names another budget than the one the call would be charged to', () => {
    const r = registry();
    r.resolve({ 'x-svc-execution-id': 'e1', 'x-svc-budget-id': 'b2' });
    expect(refusal(() => r.resolve({ 'x-svc-execution-id': 'e1', 'x-svc-budget-id': 'b3' }))).toMatchObject({
      code: 'SVC-SYS-9002',
      message: expect.stringContaining('execution e1 is charged to budget b2'),
    });
    r.resolve({ 'x-svc-envelope-id': REST_ENVELOPE });
    expect(refusal(() => r.resolve({ 'x-svc-envelope-id': REST_ENVELOPE, 'x-svc-budget-id': 'b2' }))).toMatchObject({
      code: 'SVC-SYS-9002',
    });
    // The pod's own execution is charged to the default budget; naming another needs an execution.
    expect(refusal(() => r.resolve({ 'x-svc-budget-id': 'b2' }))).toMatchObject({
      code: 'SVC-SYS-9002',
      message: expect.stringContaining('without X-Svc-Execution-Id'),
    });
    expect(r.resolve({ 'x-svc-budget-id': 'default-budget' }).envelope.budgetId).toBe('default-budget');
  });

  it('uses a named envelope as is without announcing it, and the pod execution for bare requests', () => {
    const r = registry();
    const named = r.resolve({ 'x-svc-envelope-id': REST_ENVELOPE, 'x-svc-execution-id': 'e9' });
    expect(named.opened).toBe(false);
    expect(named.envelope.envelopeId).toBe(REST_ENVELOPE);
    const pod = r.resolve({});
    expect(pod.envelope.executionId).toBe('pod-1');
    expect(pod.envelope.budgetId).toBe('default-budget');
    expect(r.resolve({}).envelope).toBe(pod.envelope);
  });

  it('refuses with SVC-SYS-9004 a budget id this sidecar is not bound to, whatever else the request names, and opens nothing', () => {
    const r = registry();
    r.resolve({ 'x-svc-execution-id': 'known' });
    for (const headers of [
      { 'x-svc-execution-id': 'e-new', 'x-svc-budget-id': 'someone-elses' },
      { 'x-svc-execution-id': 'known', 'x-svc-budget-id': 'someone-elses' },
      { 'x-svc-envelope-id': 'env-rest', 'x-svc-budget-id': 'someone-elses' },
      { 'x-svc-budget-id': ['someone-elses', 'b2'] },
    ]) {
      const error = refusal(() => r.resolve(headers));
      expect(isSvcError(error) && error.code).toBe('SVC-SYS-9004');
      expect(isSvcError(error) && error.details).toMatchObject({ budget_id: 'someone-elses' });
    }
    expect(r.get('env-rest')).toBeUndefined();
    expect(r.resolve({ 'x-svc-execution-id': 'e-new' }).opened).toBe(true);
    expect(
      r.resolve({ 'x-svc-execution-id': 'e-default', 'x-svc-budget-id': 'default-budget' }).envelope.budgetId,
    ).toBe('default-budget');
  });

  it('allows only the default budget when no other is listed', () => {
    const r = new EnvelopeRegistry({ defaultBudgetId: 'default-budget', podExecutionId: 'pod-1' });
    const error = refusal(() => r.resolve({ 'x-svc-execution-id': 'e1', 'x-svc-budget-id': 'b2' }));
    expect(isSvcError(error) && error.code).toBe('SVC-SYS-9004');
  });

  it('ends an envelope once, cutting its in-flight calls, and records remote terminations of unseen envelopes', () => {
    const r = registry();
    const { envelope } = r.resolve({ 'x-svc-execution-id': 'e1' });
    const cuts: string[] = [];
    envelope.inflight.add((ending) => cuts.push(ending.status));
    expect(r.end(envelope.envelopeId, { status: 'BUDGET_EXCEEDED', reason: 'limit' })).toBe(true);
    expect(r.end(envelope.envelopeId, { status: 'TERMINATED', reason: 'again' })).toBe(false);
    expect(cuts).toEqual(['BUDGET_EXCEEDED']);
    r.endRemote('env-x', 'exec-x', 'default-budget', { status: 'TERMINATED', reason: 'operator' });
    expect(r.resolve({ 'x-svc-execution-id': 'exec-x' }).envelope.ending?.status).toBe('TERMINATED');
  });

  it("refuses an execution terminated elsewhere only when it is this sidecar's: on its budgets, and not served here on another envelope", () => {
    const r = registry();
    const own = r.resolve({ 'x-svc-execution-id': 'nightly' }).envelope;
    const ending = { status: 'TERMINATED', reason: 'operator' } as const;
    // Another proxy's envelope of the same execution id: this one's goes on.
    r.endRemote('env-elsewhere', 'nightly', 'default-budget', ending);
    expect(r.resolve({ 'x-svc-execution-id': 'nightly' }).envelope).toBe(own);
    expect(own.ending).toBeNull();
    // Another team's execution of the same name, new here: a new envelope, not theirs.
    const otherTeams = '5a1b3e7c-4d8f-4d9c-8d4e-0f6a7b8c9da4';
    r.endRemote(otherTeams, 'weekly', 'someone-elses', ending);
    const weekly = r.resolve({ 'x-svc-execution-id': 'weekly' });
    expect(weekly).toMatchObject({ opened: true, envelope: { ending: null } });
    // Named by its id, it is refused all the same.
    expect(r.resolve({ 'x-svc-envelope-id': otherTeams }).envelope.ending?.status).toBe('TERMINATED');
    // On a budget this sidecar charges, and new here: its calls are refused.
    r.endRemote('env-b2', 'monthly', 'b2', ending);
    expect(r.resolve({ 'x-svc-execution-id': 'monthly' }).envelope).toMatchObject({
      envelopeId: 'env-b2',
      ending: { status: 'TERMINATED' },
    });
  });

  it('forgets the oldest idle envelopes beyond its bound but never the pod execution, one in flight or one paused', () => {
    const r = registry();
    const pod = r.resolve({}).envelope;
    const busy = r.resolve({ 'x-svc-execution-id': 'busy' }).envelope;
    busy.inflight.add(() => undefined);
    const paused = r.resolve({ 'x-svc-execution-id': 'paused' }).envelope;
    paused.paused = 'immune system';
    r.resolve({ 'x-svc-execution-id': 'idle' });
    r.resolve({ 'x-svc-execution-id': 'newer' });
    expect(r.get(pod.envelopeId)).toBe(pod);
    expect(r.get(busy.envelopeId)).toBe(busy);
    expect(r.get(paused.envelopeId)).toBe(paused);
    expect(r.resolve({ 'x-svc-execution-id': 'idle' }).opened).toBe(true);
  });
});

describe('EnvelopeRegistry with the control plane holds', () => {
  const PAUSED_ENVELOPE = '1c7d9a3e-0f4b-4f5e-8f0a-6b2d3c4e5f60';
  const ENDED_ENVELOPE = '2d8e0b4f-1a5c-4a6f-9a1b-7c3e4d5f6a71';
  const hold = (envelope_id: string, execution_id: string, status: 'PAUSED' | 'TERMINATED') => ({
    tenant_id: 'acme',
    envelope_id,
    execution_id,
    status,
    reason: status === 'PAUSED' ? 'operator looks first' : null,
    written_at: '2026-01-01T00:00:00.000Z',
  });
  const holds = [hold(PAUSED_ENVELOPE, 'exec-paused', 'PAUSED'), hold(ENDED_ENVELOPE, 'exec-ended', 'TERMINATED')];
  const held = () =>
    new EnvelopeRegistry({
      defaultBudgetId: 'default-budget',
      podExecutionId: 'pod-1',
      maxEntries: 2,
      holds: {
        forEnvelope: (id) => holds.find((h) => h.envelope_id === id),
        forExecution: (id) => holds.find((h) => h.execution_id === id),
        ended: () => undefined,
      },
    });

  it('meets a held envelope anew paused or ended, by envelope id and by execution id, and announces nothing', () => {
    const r = held();
    const byId = r.resolve({ 'x-svc-envelope-id': PAUSED_ENVELOPE });
    expect(byId.envelope.paused).toBe('operator looks first');
    expect(byId.envelope.ending).toBeNull();
    const byExecution = r.resolve({ 'x-svc-execution-id': 'exec-ended' });
    expect(byExecution).toMatchObject({ opened: false, envelope: { envelopeId: ENDED_ENVELOPE } });
    expect(byExecution.envelope.ending).toEqual({ status: 'TERMINATED', reason: 'terminated' });
    expect(r.resolve({ 'x-svc-execution-id': 'exec-paused' }).envelope).toBe(byId.envelope);
  });

  it('meets a held envelope anew on the budget the control plane holds it on, when this sidecar may charge it', () => {
    const onBudget = (envelope_id: string, execution_id: string, budget_id: string) => ({
      ...hold(envelope_id, execution_id, 'PAUSED'),
      budget_id,
    });
    const ON_B2 = '3e9f1c5a-2b6d-4b7a-8b2c-8d4e5f6a7b82';
    const ELSEWHERE = '4f0a2d6b-3c7e-4c8b-9c3d-9e5f6a7b8c93';
    const kept = [onBudget(ON_B2, 'exec-b2', 'b2'), onBudget(ELSEWHERE, 'exec-elsewhere', 'someone-elses')];
    const r = new EnvelopeRegistry({
      defaultBudgetId: 'default-budget',
      allowedBudgetIds: ['b2'],
      podExecutionId: 'pod-1',
      holds: {
        forEnvelope: (id) => kept.find((h) => h.envelope_id === id),
        forExecution: (id) => kept.find((h) => h.execution_id === id),
        ended: () => undefined,
      },
    });
    // Without a budget header, as an agent's later calls of an execution may come.
    expect(r.resolve({ 'x-svc-execution-id': 'exec-b2' }).envelope.budgetId).toBe('b2');
    expect(r.resolve({ 'x-svc-envelope-id': ON_B2, 'x-svc-budget-id': 'b2' }).envelope.budgetId).toBe('b2');
    expect(refusal(() => r.resolve({ 'x-svc-envelope-id': ON_B2, 'x-svc-budget-id': 'default-budget' }))).toMatchObject(
      { code: 'SVC-SYS-9002' },
    );
    // Another budget's envelope: this sidecar's own budget pays, and the control plane leaves the envelope be.
    expect(r.resolve({ 'x-svc-envelope-id': ELSEWHERE }).envelope.budgetId).toBe('default-budget');
  });

  it('still knows an ended envelope after forgetting it', () => {
    const r = held();
    const ended = r.resolve({ 'x-svc-execution-id': 'exec-ended' }).envelope;
    for (const execution of ['a', 'b', 'c']) r.resolve({ 'x-svc-execution-id': execution });
    expect(r.get(ended.envelopeId)).toBeUndefined();
    const again = r.resolve({ 'x-svc-execution-id': 'exec-ended' });
    expect(again.opened).toBe(false);
    expect(again.envelope.ending?.status).toBe('TERMINATED');
    expect(r.resolve({ 'x-svc-execution-id': 'unheld' }).envelope.ending).toBeNull();
  });
});
