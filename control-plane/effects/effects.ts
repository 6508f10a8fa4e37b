import type { DetectionKind } from '../../core/brain/immune/detection.ts';
import type { ApprovalStanding, PauseSignal, TerminateSignal } from '../../core/sync/contract.ts';

/** A bus message announcing a change: written to the outbox in the change's own transaction. */
export interface Publication {
  subject: string;
  data: Record<string, unknown>;
  msgId: string;
}

export interface WebhookCall {
  /** Whose signing key signs the delivery. */
  tenant: string;
  url: string;
  /** The JSON body; also published on the bus as `data`. */
  body: Record<string, unknown>;
  deliveryId: string;
}

/** State the proxies hold a copy of, changed by the transaction; `hold`: an envelope paused, resumed or ended. */
export type StateChange =
  | { kind: 'ruleset'; tenant: string }
  | { kind: 'budget'; tenant: string; budgetId: string }
  | { kind: 'hold'; tenant: string; envelopeId: string };

/**
 * A proxy's message that named an envelope of another budget than the one it charges, and so was
 * not applied to that envelope (`actsOn` in control-plane/usage). `claim` is what it asked:
 * its call counted, the envelope paused or ended.
 */
export interface ForeignClaim {
  claim: 'usage' | 'pause' | 'termination';
  tenant: string;
  envelopeId: string;
  envelopeBudget: string | null;
  claimedBudget: string | null;
}

/**
 * What a change asks the outside world to learn, collected while its transaction runs
 * (`EffectDispatcher.commit`): publications go to the outbox in that transaction, so a
 * rolled-back change announces nothing and a committed one is announced even if NATS is down;
 * the rest is carried out in the background once it committed.
 */
export interface Effects {
  publications: Publication[];
  webhooks: WebhookCall[];
  changes: StateChange[];
  signals: TerminateSignal[];
  /** Envelopes paused or running again: signalled to the proxies, which hold or release their calls. */
  pauses: PauseSignal[];
  /** Approvals decided: signalled to the proxies holding a call for one of them. */
  decisions: ApprovalStanding[];
  /** Immune System detections stored, counted once committed (`svc_immune_detections_total`). */
  detections: DetectionKind[];
  /** Proxy messages not applied to the envelope they named: logged and counted once committed. */
  foreignClaims: ForeignClaim[];
}

export function noEffects(): Effects {
  return {
    publications: [],
    webhooks: [],
    changes: [],
    signals: [],
    pauses: [],
    decisions: [],
    detections: [],
    foreignClaims: [],
  };
}
