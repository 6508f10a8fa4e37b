import { z } from 'zod';
import type { EvaluationResult } from '../../policy/result.ts';
import { canonicalTime, TimestampSchema } from '../../domain/timestamp.ts';

/** What the Immune System detects: an ordered pattern of actions, or a rate against its baseline. */
export const DETECTION_KINDS = ['sequence', 'call_rate', 'spend'] as const;
export const DetectionKindSchema = z.enum(DETECTION_KINDS);
export type DetectionKind = z.infer<typeof DetectionKindSchema>;

/** The event types under which proxies (and REST callers) report detections. */
export const DETECTION_EVENT_TYPES: ReadonlySet<string> = new Set(['immune.anomaly', 'immune.sequence']);

/** One detection, as the control plane keeps it (docs/brain.md, Detections). */
export const ImmuneDetectionSchema = z.object({
  /** The id of the event that reported it, or of the evaluation that made it: a replay is one detection. */
  detection_id: z.string(),
  tenant_id: z.string(),
  kind: DetectionKindSchema,
  /** What a sequence shows (`DATA_EXFILTRATION`); null for an anomaly. */
  category: z.string().nullable(),
  envelope_id: z.string().nullable(),
  execution_id: z.string().nullable(),
  /** The action that completed a sequence (`tool:http_post`); null for an anomaly. */
  action: z.string().nullable(),
  /** The policy and rule whose sequence condition matched; null for the built-in rules and anomalies. */
  policy_id: z.string().nullable(),
  rule_id: z.string().nullable(),
  /** What was done about it: `alert`, `terminate`, `pause` (anomalies), or the rule's decision (`deny`, `warn`…). */
  response: z.string(),
  /** The anomaly's figures (`scope`, `count`, `baseline`, `z`, `ceiling`, `interval_start`); empty for a sequence. */
  details: z.record(z.string(), z.unknown()),
  /** Where it was detected: `proxy:<pod>`, `control-plane`, `rest`. */
  source: z.string(),
  /** When, as its reporter says. */
  detected_at: TimestampSchema,
  /**
   * When the control plane received it: the list's order, its `since`/`until` and retention go by
   * this, as a reporter's clock may say anything (a detection dated 9999 would top the list and
   * outlive retention).
   */
  recorded_at: TimestampSchema,
});
export type ImmuneDetection = z.infer<typeof ImmuneDetectionSchema>;

const str = (value: unknown): string | null => (typeof value === 'string' && value !== '' ? value.slice(0, 256) : null);

/** The detection an `immune.*` event reports, or undefined when the event is no detection. */
export function detectionOfEvent(event: {
  event_id: string;
  tenant_id: string;
  envelope_id: string;
  event_type: string;
  timestamp: string;
  received_at: string;
  source: string;
  payload: Readonly<Record<string, unknown>>;
}): ImmuneDetection | undefined {
  if (!DETECTION_EVENT_TYPES.has(event.event_type)) return undefined;
  const {
    kind: given,
    category,
    action,
    denied_action: deniedAction,
    policy_id,
    rule_id,
    execution_id,
  } = event.payload;
  const kind = DetectionKindSchema.safeParse(given);
  if (!kind.success) return undefined;
  const sequence = kind.data === 'sequence';
  const details = sequence
    ? {}
    : Object.fromEntries(
        ['scope', 'count', 'baseline', 'z', 'ceiling', 'interval_start', 'moved_from'].flatMap((k) =>
          event.payload[k] === undefined ? [] : [[k, event.payload[k]]],
        ),
      );
  return {
    detection_id: event.event_id,
    tenant_id: event.tenant_id,
    kind: kind.data,
    category: sequence ? (str(category) ?? 'SUSPICIOUS') : null,
    envelope_id: event.envelope_id,
    execution_id: str(execution_id),
    action: sequence ? str(deniedAction) : null,
    policy_id: sequence ? str(policy_id) : null,
    rule_id: sequence ? str(rule_id) : null,
    response: str(action)?.toLowerCase() ?? 'alert',
    details,
    source: event.source,
    detected_at: canonicalTime(event.timestamp),
    recorded_at: canonicalTime(event.received_at),
  };
}

/**
 * The sequence an evaluation's deciding (or first warning) rule matched: a tenant's `sequence`
 * condition, or a SEMANTIC condition the built-in judge answered from a sequence rule
 * (`sequence.*` evidence). Undefined when no sequence took part.
 */
export function sequenceOf(
  result: EvaluationResult,
): { category: string; policy_id: string | null; rule_id: string | null } | undefined {
  const rule = { policy_id: result.matched_policy, rule_id: result.matched_rule };
  if (result.sequence !== undefined) return { category: result.sequence.category, ...rule };
  const semantic = result.semantic;
  if (semantic !== undefined && semantic.evidence.some((e) => e.signal.startsWith('sequence.')))
    return { category: semantic.category ?? 'SUSPICIOUS', ...rule };
  return undefined;
}

/** The payload of the `immune.sequence` event that reports a sequence matched on `action`. */
export function sequencePayload(
  sequence: NonNullable<ReturnType<typeof sequenceOf>>,
  action: string,
  result: EvaluationResult,
): Record<string, unknown> {
  return { kind: 'sequence', ...sequence, denied_action: action, action: result.decision.toLowerCase() };
}
