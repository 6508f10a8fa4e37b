import { randomUUID } from 'node:crypto';
import { status } from '@grpc/grpc-js';
import { subjects } from '../../core/bus/subjects.ts';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ActionHistory } from '../../core/brain/index.ts';
import { loadServedDefinition } from '../../control-plane/grpc/contracts.ts';
import { SECRET_READ_SEQUENCE } from '../fixtures/policies.ts';
import {
  eventually,
  expectSvcError,
  startControlPlane,
  tenantWithKey,
  type RunningControlPlane,
} from '../harness/control-plane.ts';
import { clientsFor, failure, statusDetails, unary, type Clients } from '../harness/grpc.ts';
import { withOffset } from '../harness/offset-time.ts';

/**
 * The Immune System's detections in the control plane, on the storage SVC_TEST_STORAGE names:
 * a tenant's sequence rule matched over REST (the history the control plane keeps per credential,
 * across the executions it names),
 * an anomaly recorded as an `immune.anomaly` event, both listed over REST and gRPC with their
 * filters and pages; and the brain's three gRPC services.
 */
let cp: RunningControlPlane;
let clients: Clients;
let key: string;
let reader: string;
let envelopeId: string;

const SEQUENCE_POLICY = {
  name: 'secret-read-then-post',
  priority: 500,
  rules: [
    {
      action: 'tool:http_post',
      effect: 'deny',
      conditions: [
        {
          field: 'recent_actions',
          operator: 'sequence',
          value: SECRET_READ_SEQUENCE,
        },
      ],
    },
  ],
};

const evaluate = (action: string, context: Record<string, unknown>) =>
  cp.call('POST', '/v1/policies/evaluate', { key, body: { action, context } });
const list = (query = '', as = reader) => cp.call('GET', `/v1/brain/immune-system/detections${query}`, { key: as });
const grpc = (service: string, method: string, request: object, as = key) =>
  unary(clients.client(`svc.brain.v1.${service}`), method, request, { key: as });

beforeAll(async () => {
  cp = await startControlPlane();
  key = await tenantWithKey(cp, 'immuneco');
  reader = await tenantWithKey(cp, 'immuneco', ['events:read']);
  clients = clientsFor(loadServedDefinition(), `127.0.0.1:${String(cp.plane.grpcPort())}`);
  const policy = await cp.call('POST', '/v1/policies', { key, body: SEQUENCE_POLICY });
  expect(policy.status).toBe(201);
  const envelope = await cp.call('POST', '/v1/envelopes', { key, body: { adapter_type: 'custom' } });
  expect(envelope.status).toBe(201);
  envelopeId = String(envelope.body.envelope_id);
}, 30_000);
afterAll(async () => {
  clients.close();
  await cp.close();
});

describe('a sequence rule over REST evaluations', () => {
  it('lets the reverse order through', async () => {
    expect((await evaluate('tool:http_post', { execution_id: 'exec-c' })).body).toMatchObject({ decision: 'ALLOW' });
    const read = await evaluate('tool:read_file', { execution_id: 'exec-c', tool_args: '{"path":"id_rsa"}' });
    expect(read.body).toMatchObject({ decision: 'ALLOW' });
    expect((await list('?execution_id=exec-c')).body.detections).toEqual([]);
  });

  it('refuses the post that follows a secret read of the same execution, and keeps the detection', async () => {
    const read = await evaluate('tool:read_file', {
      execution_id: 'exec-a',
      tool_name: 'read_file',
      tool_args: '{"path":"/srv/app/.env"}',
    });
    expect(read.body).toMatchObject({ decision: 'ALLOW' });
    const post = await evaluate('tool:http_post', { execution_id: 'exec-a', tool_name: 'http_post' });
    expect(post.body).toMatchObject({ decision: 'DENY', sequence: { category: 'DATA_EXFILTRATION' } });

    const listed = await list('?kind=sequence');
    expect(listed.status).toBe(200);
    expect(listed.body).toEqual({
      detections: [
        expect.objectContaining({
          kind: 'sequence',
          category: 'DATA_EXFILTRATION',
          execution_id: 'exec-a',
          action: 'tool:http_post',
          policy_id: post.body.matched_policy,
          response: 'deny',
          source: 'control-plane',
        }),
      ],
      next_page_token: '',
    });
  });

  it("reads the credential's history only for an action a rule reads it for", async () => {
    const recent = vi.spyOn(ActionHistory.prototype, 'recent');
    try {
      // The sequence rule is a tool call's: opening an envelope (execution:start) has no use for it.
      const envelope = await cp.call('POST', '/v1/envelopes', { key, body: { adapter_type: 'custom' } });
      expect(envelope.status).toBe(201);
      expect(recent).not.toHaveBeenCalled();
      await evaluate('tool:list_dir', { execution_id: 'exec-d' });
      expect(recent).toHaveBeenCalledTimes(1);
    } finally {
      recent.mockRestore();
    }
  });
});

describe('a sequence rule over REST evaluations of several executions', () => {
  // A tenant of its own: its detections stay out of the lists the tests below read.
  let agent: string;
  let other: string;
  const as = (credential: string, action: string, context: Record<string, unknown>) =>
    cp.call('POST', '/v1/policies/evaluate', { key: credential, body: { action, context } });

  beforeAll(async () => {
    const owner = await tenantWithKey(cp, 'sequenceco');
    expect((await cp.call('POST', '/v1/policies', { key: owner, body: SEQUENCE_POLICY })).status).toBe(201);
    agent = await tenantWithKey(cp, 'sequenceco', ['envelopes:write', 'policies:read']);
    other = await tenantWithKey(cp, 'sequenceco', ['envelopes:write', 'policies:read']);
  });

  it('refuses a post in another execution of the credential that read the secret, or one without an execution', async () => {
    const read = await as(agent, 'tool:read_file', { execution_id: 'exec-read', tool_args: '{"path":"/srv/.env"}' });
    expect(read.body).toMatchObject({ decision: 'ALLOW' });
    const post = await as(agent, 'tool:http_post', { execution_id: 'exec-send', tool_name: 'http_post' });
    expect(post.body).toMatchObject({ decision: 'DENY', sequence: { category: 'DATA_EXFILTRATION' } });
    expect((await as(agent, 'tool:http_post', {})).body).toMatchObject({ decision: 'DENY' });
    // The caller's own earlier actions add to the history; an empty list hides nothing.
    const given = await as(agent, 'tool:http_post', { execution_id: 'exec-given', recent_actions: [] });
    expect(given.body).toMatchObject({ decision: 'DENY' });
    const auditor = await tenantWithKey(cp, 'sequenceco', ['events:read']);
    const listed = await list('?execution_id=exec-send', auditor);
    expect(listed.body.detections).toEqual([
      expect.objectContaining({ kind: 'sequence', execution_id: 'exec-send', source: 'control-plane' }),
    ]);
  });

  it("lets another credential's post through: the history is the credential's", async () => {
    expect((await as(other, 'tool:http_post', { execution_id: 'exec-read' })).body).toMatchObject({
      decision: 'ALLOW',
    });
  });
});

describe('anomalies recorded as events', () => {
  it('become detections with their figures, counted in svc_immune_detections_total', async () => {
    const recorded = await cp.call('POST', `/v1/envelopes/${envelopeId}/events`, {
      key,
      body: {
        event_type: 'immune.anomaly',
        timestamp: new Date().toISOString(),
        payload: {
          kind: 'call_rate',
          count: 90,
          baseline: 4.2,
          z: 9.1,
          interval_start: new Date().toISOString(),
          action: 'alert',
        },
      },
    });
    expect(recorded.status).toBe(202);
    const listed = await list(`?envelopeId=${envelopeId}`);
    expect(listed.body.detections).toEqual([
      expect.objectContaining({
        detection_id: recorded.body.event_id,
        kind: 'call_rate',
        category: null,
        envelope_id: envelopeId,
        response: 'alert',
        source: 'rest',
        details: expect.objectContaining({ count: 90, baseline: 4.2, z: 9.1 }),
      }),
    ]);
    expect(listed.body.detections[0].execution_id).toEqual(expect.any(String));
    const metrics = await fetch(`${cp.url}/metrics`);
    expect(await metrics.text()).toMatch(/svc_immune_detections_total\{kind="call_rate"\} 1/);
  });
});

describe('an envelope the Immune System paused', () => {
  it('is resumed by a policy author, not by the key the agent holds', async () => {
    // A tenant of its own: its detection stays out of the lists the tests below read.
    const owner = await tenantWithKey(cp, 'pauseco');
    const opened = await cp.call('POST', '/v1/envelopes', { key: owner, body: { adapter_type: 'custom' } });
    const id = String(opened.body.envelope_id);
    // As a proxy whose Immune System paused the envelope reports it.
    const event = {
      event_id: randomUUID(),
      tenant_id: 'pauseco',
      envelope_id: id,
      event_type: 'immune.anomaly',
      timestamp: new Date().toISOString(),
      tokens: { input: 0, output: 0 },
      payload: { kind: 'spend', count: 40, baseline: 1, z: 12, action: 'pause' },
      source: 'proxy:pod-a',
    };
    await cp.messaging.bus.publish(subjects.event('pauseco', 'immune.anomaly'), event, { msgId: event.event_id });
    await eventually(
      async () => String((await cp.call('GET', `/v1/envelopes/${id}`, { key: owner })).body.state),
      (state) => state === 'PAUSED',
    );
    const agent = await tenantWithKey(cp, 'pauseco', ['envelopes:write', 'envelopes:read']);
    const resume = (as: string) =>
      cp.call('POST', `/v1/envelopes/${id}/status`, { key: as, body: { status: 'RUNNING' } });
    const refused = await resume(agent);
    expectSvcError(refused, 403, 'SVC-SYS-9004');
    expect(refused.body.error.details).toMatchObject({ required_scope: 'policies:write' });
    expect((await resume(owner)).status).toBe(200);
    // A pause the agent asked for itself, it may lift.
    expect(
      (await cp.call('POST', `/v1/envelopes/${id}/status`, { key: agent, body: { status: 'PAUSED' } })).status,
    ).toBe(200);
    expect((await resume(agent)).status).toBe(200);
  });
});

describe('GET /v1/brain/immune-system/detections', () => {
  it('pages newest first, and filters by time', async () => {
    const first = await list('?page_size=1');
    expect(first.body.detections).toHaveLength(1);
    expect(first.body.detections[0].kind).toBe('call_rate');
    expect(first.body.next_page_token).not.toBe('');
    const second = await list(`?page_size=1&page_token=${first.body.next_page_token}`);
    expect(second.body.detections[0].kind).toBe('sequence');
    expect(second.body.next_page_token).toBe('');
    const future = new Date(Date.now() + 60_000).toISOString();
    expect((await list(`?since=${future}`)).body.detections).toEqual([]);
    expect((await list(`?until=${future}`)).body.detections).toHaveLength(2);
    expect((await list(`?until=${encodeURIComponent('2020-01-01T00:00:00Z')}`)).body.detections).toEqual([]);
    // An offset names the instant: since the newest's own time written east of UTC (text sorting
    // after it) still holds it, until it written west (text sorting before) holds the older one.
    const newest = first.body.detections[0].recorded_at as string;
    const since = await list(`?since=${encodeURIComponent(withOffset(newest, 300))}`);
    expect(since.body.detections.map((d: { recorded_at: string }) => d.recorded_at)).toEqual([newest]);
    const until = await list(`?until=${encodeURIComponent(withOffset(newest, -300))}`);
    expect(until.body.detections).toHaveLength(1);
    expect(until.body.detections[0].kind).toBe('sequence');
  });

  it('refuses bad parameters naming the field, and a caller without events:read', async () => {
    expect(expectSvcError(await list('?page_size=101'), 400, 'SVC-SYS-9002').details).toMatchObject({
      fields: 'page_size',
    });
    expect(expectSvcError(await list('?kind=rash'), 400, 'SVC-SYS-9002').details).toMatchObject({ fields: 'kind' });
    expect(expectSvcError(await list('?since=yesterday'), 400, 'SVC-SYS-9002').details).toMatchObject({
      fields: 'since',
    });
    expectSvcError(await list('?page_token=bogus!'), 400, 'SVC-SYS-9002');
    const noScope = await tenantWithKey(cp, 'immuneco', ['budgets:read']);
    expectSvcError(await list('', noScope), 403, 'SVC-SYS-9004');
  });

  it("shows one tenant nothing of another's", async () => {
    const other = await tenantWithKey(cp, 'otherco');
    expect((await list('', other)).body).toEqual({ detections: [], next_page_token: '' });
  });
});

describe('svc.brain.v1 over gRPC', () => {
  it('ImmuneSystemService.ListDetections lists the same detections, by kind and page', async () => {
    const all = await grpc('ImmuneSystemService', 'ListDetections', {});
    expect(all.detections.map((d: { kind: string }) => d.kind)).toEqual([
      'DETECTION_KIND_CALL_RATE',
      'DETECTION_KIND_SEQUENCE',
    ]);
    const sequence = await grpc('ImmuneSystemService', 'ListDetections', { kind: 'DETECTION_KIND_SEQUENCE' });
    expect(sequence.detections).toEqual([
      expect.objectContaining({ category: 'DATA_EXFILTRATION', execution_id: 'exec-a', response: 'deny' }),
    ]);
    const page = await grpc('ImmuneSystemService', 'ListDetections', { page_size: 1 });
    expect(page.detections).toHaveLength(1);
    const next = await grpc('ImmuneSystemService', 'ListDetections', {
      page_size: 1,
      page_token: page.next_page_token,
    });
    expect(next.detections[0].kind).toBe('DETECTION_KIND_SEQUENCE');
    const wrongOrder = await failure(
      grpc('ImmuneSystemService', 'ListDetections', {
        start_time: { seconds: 2_000_000_000, nanos: 0 },
        end_time: { seconds: 1_000_000_000, nanos: 0 },
      }),
    );
    expect(wrongOrder.code).toBe(status.INVALID_ARGUMENT);
    expect(statusDetails(wrongOrder).badRequest?.fieldViolations.map((v) => v.field)).toEqual(['end_time']);
  });

  it('SemanticJudgeService.Evaluate judges as the REST route does', async () => {
    const verdict = await grpc('SemanticJudgeService', 'Evaluate', {
      intent: 'DESTRUCTIVE',
      tool_name: 'run_sql',
      tool_args: { structValue: { fields: { sql: { stringValue: 'DROP TABLE users' } } } },
    });
    expect(verdict).toMatchObject({ violated: true, category: 'DESTRUCTIVE', judge: 'builtin' });
    expect(verdict.evidence[0]).toMatchObject({ field: 'tool_args.sql', signal: 'sql.drop' });
    const rest = await cp.call('POST', '/v1/brain/semantic-judge/evaluate', {
      key,
      body: { text: '', intent: 'DESTRUCTIVE', tool_name: 'run_sql', tool_args: { sql: 'DROP TABLE users' } },
    });
    expect(verdict.confidence).toBe(rest.body.confidence);
    const benign = await grpc('SemanticJudgeService', 'Evaluate', { text: 'weather in Zurich', intent: 'SUSPICIOUS' });
    expect(benign).toMatchObject({ violated: false, category: '' });
    const missing = await failure(grpc('SemanticJudgeService', 'Evaluate', { text: 'x' }));
    expect(statusDetails(missing).badRequest?.fieldViolations.map((v) => v.field)).toEqual(['intent']);
  });

  it('OracleService.PredictOverrun predicts a workload given inline, and a budget', async () => {
    const start = Date.parse('2026-01-01T00:00:00Z') / 1000;
    const calls = Array.from({ length: 20 }, (_, i) => ({ at: { seconds: start + i * 3600, nanos: 0 }, amount: 1 }));
    const prediction = await grpc('OracleService', 'PredictOverrun', {
      workload: {
        limit: 30,
        spent: 20,
        period_start: { seconds: start, nanos: 0 },
        period_end: { seconds: start + 48 * 3600, nanos: 0 },
        calls,
        now: { seconds: start + 20 * 3600, nanos: 0 },
      },
    });
    expect(prediction).toMatchObject({ dimension: 'OVERRUN_DIMENSION_WORKLOAD', limit: 30, spent: 20 });
    expect(prediction.probability).toBeGreaterThan(0.5);
    expect(prediction.method).toMatch(/^OVERRUN_METHOD_/);
    const budget = await cp.call('POST', '/v1/budgets', {
      key,
      body: { name: 'oracle', type: 'cost', limits: { max_cost_usd: 10 }, period: 'monthly' },
    });
    const byBudget = await grpc('OracleService', 'PredictOverrun', { budget_id: budget.body.budget_id });
    expect(byBudget).toMatchObject({ budget_id: budget.body.budget_id, dimension: 'OVERRUN_DIMENSION_COST_USD' });
    const none = await failure(grpc('OracleService', 'PredictOverrun', {}));
    expect(none.code).toBe(status.INVALID_ARGUMENT);
    const unknown = await failure(grpc('OracleService', 'PredictOverrun', { budget_id: 'no-such-budget' }));
    expect(unknown.code).toBe(status.NOT_FOUND);
  });

  it("PolicyService evaluations read and feed the credential's history too, and their matches are detections of the execution (attributes.execution_id)", async () => {
    const evaluateTool = (tool: string, attributes: Record<string, string>) =>
      unary(
        clients.client('svc.policy.v1.PolicyService'),
        'EvaluatePolicies',
        {
          context: {
            tenant_id: 'immuneco',
            phase: 'EXECUTION_PHASE_PRE_TOOL_CALL',
            tool_names: [tool],
            attributes: { execution_id: 'exec-grpc', ...attributes },
          },
        },
        { key },
      );
    const read = await evaluateTool('read_file', { tool_args: '{"path":"config/secrets.yaml"}' });
    expect(read.final_decision).toBe('EVALUATION_DECISION_ALLOW');
    const post = await evaluateTool('http_post', {});
    expect(post.final_decision).toBe('EVALUATION_DECISION_DENY');
    const listed = await grpc('ImmuneSystemService', 'ListDetections', { execution_id: 'exec-grpc' });
    expect(listed.detections).toEqual([
      expect.objectContaining({ kind: 'DETECTION_KIND_SEQUENCE', action: 'tool:http_post', response: 'deny' }),
    ]);
  });
});
