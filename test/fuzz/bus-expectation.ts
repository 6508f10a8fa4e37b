import {
  addTotals,
  consumerOf,
  TERMINATED_STATUSES,
  zeroTotals,
  type Consumer,
  type Fate,
  type Totals,
} from './bus-messages.ts';
import type { TenantIds } from './bus-target.ts';

/** One published message as JetStream took it. */
export interface Sent {
  subject: string;
  bytes: Uint8Array;
  msgId: string;
  fate: Fate;
  label: string;
  seq: number;
  /** JetStream dropped it: its msg id was published before. */
  duplicate: boolean;
}

export interface ExpectedEnvelope {
  budgetId: string | null;
  cost: Totals;
  origin: 'rest' | 'usage' | 'opened' | 'ended';
  state: string;
  /** Only messages of one consumer touch it, and none of them end it by other rules (limits, alerts). */
  stateKnown: boolean;
  adapterType?: string;
  source?: string;
}

export interface SetAsideExpected {
  consumer: Consumer;
  reason: 'refused' | 'undecodable';
  sent: Sent;
}

const FINAL = new Set(['COMPLETED', 'FAILED', ...TERMINATED_STATUSES]);
const ENDING = new Set<string>(TERMINATED_STATUSES);

/**
 * The home tenant's state as the rules say it must be after the messages published so far, in
 * stream order: usage applied once per event id (apply-usage: an unknown envelope is opened when
 * the event names a budget; a proxy's event charges its own budget, any other the envelope's
 * budget, else the event's; a proxy's event or an ending that names another budget than its
 * envelope's leaves the envelope as it is; totals stop at
 * their maximum), the first opening of an envelope wins, an envelope ends at the first
 * terminating status, proxies' denials are audited, and what does not validate is set aside.
 */
export class Expectation {
  readonly budgets = new Map<string, Totals>();
  readonly envelopes = new Map<string, ExpectedEnvelope>();
  readonly setAside = new Map<number, SetAsideExpected>();
  readonly poison = new Map<string, number>();
  audited = 0;
  private readonly events = new Set<string>();

  /** Budgets usage charges, whose envelopes alerts may end. */
  private readonly charged: Set<string>;

  constructor(home: TenantIds) {
    this.charged = new Set([home.budgets.main, home.budgets.small]);
    for (const id of Object.values(home.budgets)) this.budgets.set(id, zeroTotals());
    const { budgets, envelopes } = home;
    const rest = (budgetId: string | null, stateKnown = false): ExpectedEnvelope => ({
      budgetId,
      cost: zeroTotals(),
      origin: 'rest',
      state: 'AUTHORIZED',
      stateKnown,
    });
    this.envelopes.set(envelopes.e1, rest(budgets.main));
    this.envelopes.set(envelopes.e2, rest(budgets.main));
    this.envelopes.set(envelopes.e3, rest(budgets.main));
    this.envelopes.set(envelopes.e4, rest(budgets.small));
    this.envelopes.set(envelopes.capped, rest(budgets.main));
    this.envelopes.set(envelopes.loose, rest(null));
    // Only terminations name these two.
    this.envelopes.set(envelopes.t1, rest(budgets.quiet, true));
    this.envelopes.set(envelopes.t2, rest(budgets.quiet, true));
  }

  apply(sent: Sent): void {
    if (sent.duplicate) return;
    const { fate } = sent;
    switch (fate.kind) {
      case 'usage': {
        const { event } = fate;
        if (this.events.has(event.eventId)) return;
        this.events.add(event.eventId);
        let envelope = this.envelopes.get(event.envelopeId);
        if (envelope === undefined && event.budgetId !== null) {
          envelope = {
            budgetId: event.budgetId,
            cost: zeroTotals(),
            origin: 'usage',
            state: 'RUNNING',
            stateKnown: false,
          };
          this.envelopes.set(event.envelopeId, envelope);
        }
        // A proxy's call charged to another budget than its envelope's leaves the envelope be.
        const foreign =
          envelope !== undefined && event.fromProxy && event.budgetId !== null && event.budgetId !== envelope.budgetId;
        if (envelope !== undefined && !foreign) envelope.cost = addTotals(envelope.cost, event.charge);
        const budgetId =
          event.fromProxy && event.budgetId !== null ? event.budgetId : (envelope?.budgetId ?? event.budgetId);
        const budget = budgetId === null ? undefined : this.budgets.get(budgetId);
        if (budgetId !== null && budget !== undefined) this.budgets.set(budgetId, addTotals(budget, event.charge));
        return;
      }
      case 'opened':
        if (!this.envelopes.has(fate.envelopeId))
          this.envelopes.set(fate.envelopeId, {
            budgetId: fate.budgetId,
            cost: zeroTotals(),
            origin: 'opened',
            state: 'AUTHORIZED',
            stateKnown: fate.budgetId === null || !this.charged.has(fate.budgetId),
            adapterType: fate.adapterType,
            source: fate.source,
          });
        return;
      case 'ended': {
        if (!ENDING.has(fate.status)) return;
        const known = this.envelopes.get(fate.envelopeId);
        // An ending charged to another budget than the envelope's leaves it be.
        if (known !== undefined && fate.budgetId !== null && fate.budgetId !== known.budgetId) return;
        const envelope = known ?? {
          budgetId: fate.budgetId,
          cost: zeroTotals(),
          origin: 'ended' as const,
          state: 'AUTHORIZED',
          stateKnown: true,
        };
        if (!FINAL.has(envelope.state)) envelope.state = fate.status;
        this.envelopes.set(fate.envelopeId, envelope);
        return;
      }
      case 'violation':
        if (fate.audited) this.audited += 1;
        return;
      case 'announced':
        return;
      case 'refused':
      case 'undecodable': {
        const consumer = consumerOf(sent.subject);
        const reason = fate.kind;
        this.setAside.set(sent.seq, { consumer, reason, sent });
        const key = `${consumer}/${reason}`;
        this.poison.set(key, (this.poison.get(key) ?? 0) + 1);
        return;
      }
    }
  }
}
