import {
  isFinal,
  type CostTotals,
  type Envelope,
  type EnvelopeStatus,
  type Overflow,
} from '../../../core/domain/index.ts';
import { taken } from '../conflict.ts';
import { addCost } from '../totals.ts';
import {
  envelopeTimeKey,
  type EnvelopeCharge,
  type EnvelopeFilter,
  type EnvelopeRepository,
  type Page,
  type PageRequest,
  type StatusChange,
} from '../storage.ts';
import type { Entry, KvView, Space } from './kv.ts';
import type { Layout } from './layout.ts';
import { pageOfScanned, pageStart } from './pages.ts';
import type { Sync } from './promised.ts';

export class LmdbEnvelopes implements Sync<EnvelopeRepository> {
  readonly #kv: KvView;
  readonly #layout: Layout;

  constructor(kv: KvView, layout: Layout) {
    this.#kv = kv;
    this.#layout = layout;
  }

  get(tenant: string, envelopeId: string): Envelope | undefined {
    return this.#kv.get<Envelope>(this.#layout.tenant(tenant, 'envelope'), envelopeId);
  }

  getMany(tenant: string, envelopeIds: readonly string[]): Envelope[] {
    const found: Envelope[] = [];
    for (const id of new Set(envelopeIds)) {
      const envelope = this.get(tenant, id);
      if (envelope !== undefined) found.push(envelope);
    }
    return found;
  }

  /** One writer at a time holds every record already. */
  getManyForUpdate(tenant: string, envelopeIds: readonly string[]): Envelope[] {
    return this.getMany(tenant, envelopeIds);
  }

  list(tenant: string, filter: EnvelopeFilter, request?: PageRequest): Page<Envelope> {
    const { size, after } = pageStart(request);
    const all = this.#kv.range<Envelope>(this.#layout.tenant(tenant, 'envelope'), { after });
    return pageOfScanned(
      all,
      (e) =>
        (filter.status === undefined || e.status === filter.status) &&
        (filter.budgetId === undefined || e.budget_id === filter.budgetId),
      size,
    );
  }

  listNewest(
    tenant: string,
    filter: { statuses?: readonly EnvelopeStatus[] | undefined },
    request?: PageRequest,
  ): Page<Envelope> {
    const { size, after } = pageStart(request);
    const index = this.#kv.range<string>(this.#layout.tenant(tenant, 'envelope_time'), { reverse: true, after });
    const statuses = filter.statuses === undefined ? undefined : new Set(filter.statuses);
    return pageOfScanned(
      this.#indexed(tenant, index),
      (e): e is Envelope => e !== undefined && (statuses === undefined || statuses.has(e.status)),
      size,
    );
  }

  listLive(tenant: string, budgetId: string, request?: PageRequest): Page<Envelope> {
    const { size, after } = pageStart(request);
    const index = this.#kv.range<string>(this.#live(tenant, budgetId), { after });
    return pageOfScanned(
      this.#indexed(tenant, index),
      (e): e is Envelope => e !== undefined && !isFinal(e.status),
      size,
    );
  }

  /** The envelopes an index names, each under its index id (undefined where the envelope is gone). */
  *#indexed(tenant: string, index: Iterable<Entry<string>>): Generator<Entry<Envelope | undefined>> {
    const envelopes = this.#layout.tenant(tenant, 'envelope');
    for (const { id, value } of index) yield { id, value: this.#kv.get<Envelope>(envelopes, value) };
  }

  insert(tenant: string, envelope: Envelope, options: { executionTaken: 'refuse' | 'keep' }): boolean {
    const envelopes = this.#layout.tenant(tenant, 'envelope');
    if (this.#kv.get(envelopes, envelope.envelope_id) !== undefined) return false;
    const executions = this.#layout.tenant(tenant, 'execution');
    const executionTaken = this.#kv.get(executions, envelope.execution_id) !== undefined;
    if (executionTaken && options.executionTaken === 'refuse') {
      throw taken(
        'execution_id',
        envelope.execution_id,
        `execution ${envelope.execution_id} already has an envelope`,
        'already has an envelope',
      );
    }
    this.#kv.put(envelopes, envelope.envelope_id, envelope);
    this.#kv.put(this.#layout.tenant(tenant, 'envelope_time'), envelopeTimeKey(envelope), envelope.envelope_id);
    if (!executionTaken) this.#kv.put(executions, envelope.execution_id, envelope.envelope_id);
    if (envelope.budget_id !== null && !isFinal(envelope.status)) {
      this.#kv.put(this.#live(tenant, envelope.budget_id), envelope.envelope_id, envelope.envelope_id);
    }
    return true;
  }

  charge(
    tenant: string,
    envelopeId: string,
    delta: CostTotals,
    overflow: Overflow,
    updatedAt: string,
  ): Envelope | undefined {
    const space = this.#layout.tenant(tenant, 'envelope');
    const envelope = this.#kv.get<Envelope>(space, envelopeId);
    if (envelope === undefined) return undefined;
    const charged: Envelope = { ...envelope, cost: addCost(envelope.cost, delta, overflow), updated_at: updatedAt };
    this.#kv.put(space, envelopeId, charged);
    return charged;
  }

  insertMany(tenant: string, envelopes: readonly Envelope[]): string[] {
    return envelopes.flatMap((envelope) =>
      this.insert(tenant, envelope, { executionTaken: 'keep' }) ? [envelope.envelope_id] : [],
    );
  }

  chargeMany(tenant: string, charges: readonly EnvelopeCharge[]): void {
    for (const { envelopeId, delta, updatedAt } of charges)
      this.charge(tenant, envelopeId, delta, 'saturate', updatedAt);
  }

  changeStatus(tenant: string, envelopeId: string, from: EnvelopeStatus, change: StatusChange): boolean {
    return this.transition(tenant, envelopeId, from, change) !== undefined;
  }

  transition(tenant: string, envelopeId: string, from: EnvelopeStatus, change: StatusChange): Envelope | undefined {
    const space = this.#layout.tenant(tenant, 'envelope');
    const envelope = this.#kv.get<Envelope>(space, envelopeId);
    if (envelope === undefined || envelope.status !== from) return undefined;
    const next: Envelope = { ...envelope, ...change };
    this.#kv.put(space, envelopeId, next);
    if (isFinal(next.status) && next.budget_id !== null)
      this.#kv.remove(this.#live(tenant, next.budget_id), envelopeId);
    return next;
  }

  /**
   * Where a budget's live envelopes are indexed, so ending them all is a range: one of its own
   * (`[tenant, 'budget_envelope', budget, envelope]`), which no other budget's ids can enter.
   */
  #live(tenant: string, budgetId: string): Space {
    return this.#layout.nested(tenant, 'budget_envelope', budgetId);
  }
}
