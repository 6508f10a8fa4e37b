import type { SvcCode } from '../../../core/errors/index.ts';

/** Why a step refused a call before it was forwarded; counted under `decision` and answered in the provider's format. */
export interface Refusal {
  kind: 'refusal';
  decision:
    'invalid' | 'denied' | 'terminated' | 'paused' | 'unpriced' | 'budget_exceeded' | 'unrecorded' | 'upstream_error';
  code: SvcCode;
  message: string;
  envelopeId: string | null;
}

export function refusal(
  decision: Refusal['decision'],
  code: SvcCode,
  message: string,
  envelopeId: string | null,
): Refusal {
  return { kind: 'refusal', decision, code, message, envelopeId };
}

export function isRefused(value: unknown): value is Refusal {
  return typeof value === 'object' && value !== null && (value as { kind?: unknown }).kind === 'refusal';
}
