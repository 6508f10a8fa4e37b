import {
  evaluateSemantic,
  PredictOverrunRequestSchema,
  SemanticJudgeRequestSchema,
  type ImmuneDetection,
  type JudgeSelector,
  type PredictOverrunResponse,
} from '../../../core/brain/index.ts';
import { parseOrThrow } from '../../../core/errors/index.ts';
import { DetectionQuerySchema, type Detections } from '../../brain/detections.ts';
import type { Oracle } from '../../brain/oracle.ts';
import { grpcPageRequest } from '../codec/paging.ts';
import { renamedFields } from '../codec/renamed-fields.ts';
import {
  enumValue,
  fromStruct,
  fromTimestamp,
  fromValue,
  present,
  toStruct,
  toTimestamp,
} from '../codec/well-known.ts';
import type { GrpcServiceHandlers } from '../server.ts';

type Message = Record<string, unknown>;

const upper = (value: string) => value.toUpperCase();

/** svc.brain.v1.SemanticJudgeService: the judgement of POST /v1/brain/semantic-judge/evaluate. */
export function semanticJudgeService(judges: JudgeSelector): GrpcServiceHandlers {
  return {
    Evaluate: {
      largeRequest: true,
      access: 'policies:read',
      tenantField: 'tenant_id',
      handle: async (request, { caller }) => {
        const toolArgs = request.tool_args === null ? undefined : fromValue(request.tool_args, 'tool_args');
        const examples = request.examples as string[];
        const counterExamples = request.counter_examples as string[];
        const parsed = parseOrThrow(SemanticJudgeRequestSchema, {
          text: request.text,
          intent: request.intent,
          ...(present(request.tool_name) === undefined ? {} : { tool_name: request.tool_name }),
          ...(toolArgs === undefined || toolArgs === null ? {} : { tool_args: toolArgs }),
          context: request.context === null ? {} : fromStruct(request.context, 'context'),
          // proto3 `optional`: unset leaves the REST default.
          ...(typeof request.min_confidence === 'number' ? { min_confidence: request.min_confidence } : {}),
          ...(present(request.description) === undefined ? {} : { description: request.description }),
          ...(examples.length === 0 ? {} : { examples }),
          ...(counterExamples.length === 0 ? {} : { counter_examples: counterExamples }),
        });
        const verdict = await evaluateSemantic(judges.forTenant(caller.tenant), parsed);
        return { ...verdict, category: verdict.category ?? '' };
      },
    },
  };
}

function workloadOf(workload: Message) {
  return {
    limit: workload.limit,
    spent: workload.spent,
    period_start: fromTimestamp(workload.period_start, 'workload.period_start'),
    period_end: fromTimestamp(workload.period_end, 'workload.period_end'),
    calls: (workload.calls as Message[]).map((call, i) => ({
      at: fromTimestamp(call.at, `workload.calls.${i}.at`),
      amount: call.amount,
    })),
    ...(workload.now === null ? {} : { now: fromTimestamp(workload.now, 'workload.now') }),
  };
}

function toGrpcPrediction(p: PredictOverrunResponse) {
  return {
    budget_id: p.budget_id ?? '',
    envelope_id: p.envelope_id ?? '',
    dimension: `OVERRUN_DIMENSION_${upper(p.dimension)}`,
    limit: p.limit,
    spent: p.spent,
    ...(p.probability === null ? {} : { probability: p.probability }),
    expected_spend_at_end: p.expected_spend_at_end,
    spend_low: p.spend_low,
    spend_high: p.spend_high,
    expected_exhaustion_at: toTimestamp(p.expected_exhaustion_at),
    calls_per_hour_now: p.calls_per_hour_now,
    trend: `OVERRUN_TREND_${upper(p.trend)}`,
    sample_size: p.sample_size,
    history_periods: p.history_periods,
    method: `OVERRUN_METHOD_${upper(p.method)}`,
    period_start: toTimestamp(p.period_start),
    period_end: toTimestamp(p.period_end),
  };
}

/** svc.brain.v1.OracleService: the prediction of POST /v1/brain/oracle/predict-overrun. */
export function oracleService(oracle: Oracle): GrpcServiceHandlers {
  return {
    PredictOverrun: {
      largeRequest: true,
      access: 'budgets:read',
      tenantField: 'tenant_id',
      handle: async (request, { caller }) => {
        const subject = request.subject as string | undefined;
        const parsed = parseOrThrow(PredictOverrunRequestSchema, {
          ...(subject === 'budget_id' ? { budget_id: request.budget_id } : {}),
          ...(subject === 'envelope_id' ? { envelope_id: request.envelope_id } : {}),
          ...(subject === 'workload' ? { workload: workloadOf(request.workload as Message) } : {}),
        });
        return toGrpcPrediction(await oracle.answer(caller.tenant, parsed));
      },
    },
  };
}

export function toGrpcDetection(d: ImmuneDetection) {
  return {
    detection_id: d.detection_id,
    tenant_id: d.tenant_id,
    kind: `DETECTION_KIND_${upper(d.kind)}`,
    category: d.category ?? '',
    envelope_id: d.envelope_id ?? '',
    execution_id: d.execution_id ?? '',
    action: d.action ?? '',
    policy_id: d.policy_id ?? '',
    rule_id: d.rule_id ?? '',
    response: d.response,
    details: toStruct(d.details),
    source: d.source,
    detected_at: toTimestamp(d.detected_at),
    recorded_at: toTimestamp(d.recorded_at),
  };
}

/** svc.brain.v1.ImmuneSystemService: the listing of GET /v1/brain/immune-system/detections. */
export function immuneSystemService(detections: Detections): GrpcServiceHandlers {
  return {
    ListDetections: {
      access: 'events:read',
      tenantField: 'tenant_id',
      handle: async (request, { caller }) => {
        const kind = enumValue(request.kind, 'DETECTION_KIND_');
        const query = renamedFields({ since: 'start_time', until: 'end_time' }, () =>
          parseOrThrow(DetectionQuerySchema, {
            envelope_id: present(request.envelope_id),
            execution_id: present(request.execution_id),
            kind: kind?.toLowerCase(),
            since: fromTimestamp(request.start_time, 'start_time'),
            until: fromTimestamp(request.end_time, 'end_time'),
          }),
        );
        const page = await detections.list(caller.tenant, query, grpcPageRequest(request));
        return { detections: page.detections.map(toGrpcDetection), next_page_token: page.next_page_token };
      },
    },
  };
}
