import type { TerminateSignal } from '../../core/sync/contract.ts';

/** A bus message to publish once the transaction that produced it has committed. */
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

/** State the proxies hold a copy of, changed by the transaction. */
export type StateChange = { kind: 'ruleset'; tenant: string } | { kind: 'budget'; tenant: string; budgetId: string };

/**
 * What a committed change asks the outside world to learn. Services return these instead of
 * publishing inside a transaction, so a rolled-back change announces nothing.
 */
export interface Effects {
  publications: Publication[];
  webhooks: WebhookCall[];
  changes: StateChange[];
  signals: TerminateSignal[];
}

export function noEffects(): Effects {
  return { publications: [], webhooks: [], changes: [], signals: [] };
}
