import { z } from 'zod';
import type { Envelope, EnvelopeStatus } from './envelope.ts';
import { RestEnvelopeSchema, toRestEnvelope } from './envelope-rest.ts';

/**
 * The guides' traces (`/api/v1/traces`, spec 4.4): a trace is one execution, that is one
 * envelope, and its trace id is the envelope id. Its state is the guides' (spec 3.1).
 */
export const TRACE_STATES = ['PENDING', 'RUNNING', 'COMPLETED', 'BLOCKED', 'FAILED'] as const;
export const TraceStateSchema = z.enum(TRACE_STATES);
export type TraceState = z.infer<typeof TraceStateSchema>;

/** BLOCKED is a policy's denial; every other end short of completion is FAILED. */
const TRACE_STATE: Record<EnvelopeStatus, TraceState> = {
  PENDING: 'PENDING',
  AUTHORIZED: 'PENDING',
  RUNNING: 'RUNNING',
  PAUSED: 'RUNNING',
  COMPLETED: 'COMPLETED',
  POLICY_VIOLATION: 'BLOCKED',
  FAILED: 'FAILED',
  TERMINATED: 'FAILED',
  BUDGET_EXCEEDED: 'FAILED',
  TIMEOUT: 'FAILED',
};

export function traceStateOf(status: EnvelopeStatus): TraceState {
  return TRACE_STATE[status];
}

/** The envelope statuses a trace state stands for. */
export function statusesOf(state: TraceState): EnvelopeStatus[] {
  return (Object.keys(TRACE_STATE) as EnvelopeStatus[]).filter((status) => TRACE_STATE[status] === state);
}

/** The envelope as REST shows it, with the trace's id, state and duration. */
export const TraceSchema = RestEnvelopeSchema.extend({
  trace_id: z.uuid(),
  status: TraceStateSchema,
  /** From creation to the end; null while it runs. */
  duration_ms: z.number().int().nonnegative().nullable(),
});
export type Trace = z.infer<typeof TraceSchema>;

export function toTrace(e: Envelope): Trace {
  return {
    trace_id: e.envelope_id,
    status: traceStateOf(e.status),
    ...toRestEnvelope(e),
    duration_ms: e.completed_at === null ? null : Math.max(0, Date.parse(e.completed_at) - Date.parse(e.created_at)),
  };
}
