import {
  isFinal,
  MAX_TOKEN_TOTAL,
  MAX_TOTAL,
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
import { pageOf, pageStart } from './pages.ts';
import { int, type Sql } from './sql.ts';

type ModelCost = CostTotals['model_costs'][number];

interface Row {
  envelope_id: string;
  doc: Envelope;
  status: EnvelopeStatus;
  status_reason: string | null;
  updated_at: string;
  completed_at: string | null;
  tokens_input: string;
  tokens_output: string;
  cost_micros: string;
  llm_calls: string;
  tool_calls: string;
  model_costs: ModelCost[];
}

/** The envelope with what changes since its insert: status fields, cost totals, per-model costs. */
const COLUMNS = `e.envelope_id, e.doc, e.status, e.status_reason, e.updated_at, e.completed_at,
  e.tokens_input, e.tokens_output, e.cost_micros, e.llm_calls, e.tool_calls,
  (SELECT coalesce(json_agg(json_build_object('model_id', m.model_id, 'input_tokens', m.input_tokens,
      'output_tokens', m.output_tokens, 'cost_micros', m.cost_micros, 'call_count', m.call_count)
    ORDER BY m.position, m.model_id), '[]'::json)
   FROM envelope_model_costs m WHERE m.tenant_id = e.tenant_id AND m.envelope_id = e.envelope_id) AS model_costs`;
const SELECT = `SELECT ${COLUMNS} FROM envelopes e`;

function envelopeOf(row: Row): Envelope {
  return {
    ...row.doc,
    status: row.status,
    status_reason: row.status_reason,
    updated_at: row.updated_at,
    completed_at: row.completed_at,
    cost: {
      tokens_input: int(row.tokens_input),
      tokens_output: int(row.tokens_output),
      cost_micros: int(row.cost_micros),
      llm_calls: int(row.llm_calls),
      tool_calls: int(row.tool_calls),
      model_costs: row.model_costs,
    },
  };
}

const TOTALS = [
  ['tokens_input', MAX_TOKEN_TOTAL],
  ['tokens_output', MAX_TOKEN_TOTAL],
  ['cost_micros', MAX_TOTAL],
  ['llm_calls', MAX_TOTAL],
  ['tool_calls', MAX_TOTAL],
] as const satisfies ReadonlyArray<readonly [keyof CostTotals, number]>;

/**
 * Adds `$3`… `$7` to the totals, held at their maxima; returns the envelope after. Runs once the
 * row is locked: had the statement to wait for the lock, the per-model costs it returns would be
 * read as of before the wait.
 */
const CHARGE = `UPDATE envelopes AS e SET
  ${TOTALS.map(([c, max], i) => `${c} = LEAST(e.${c} + $${i + 3}::bigint, ${max})`).join(',\n  ')},
  updated_at = $8
WHERE e.tenant_id = $1 AND e.envelope_id = $2
RETURNING ${COLUMNS}`;

const MODEL_TOTALS = [
  ['input_tokens', MAX_TOKEN_TOTAL],
  ['output_tokens', MAX_TOKEN_TOTAL],
  ['cost_micros', MAX_TOTAL],
  ['call_count', MAX_TOTAL],
] as const satisfies ReadonlyArray<readonly [keyof ModelCost, number]>;

/** The per-model cost rows CHARGE_MODELS and CHARGE_MANY_MODELS insert, from their deltas `d`. */
const INSERT_MODEL_COSTS = `INSERT INTO envelope_model_costs AS m
  (tenant_id, envelope_id, model_id, position, input_tokens, output_tokens, cost_micros, call_count)`;
const BOUNDED_MODEL_DELTAS = MODEL_TOTALS.map(([c, max]) => `LEAST(d.${c}, ${max})`).join(', ');
/** A model the envelope was charged for before adds the delta to its row, held at the maxima. */
const ADD_TO_MODEL_COSTS = `ON CONFLICT (tenant_id, envelope_id, model_id) DO UPDATE SET
  ${MODEL_TOTALS.map(([c, max]) => `${c} = LEAST(m.${c} + excluded.${c}, ${max})`).join(',\n  ')}`;

/**
 * Locks the envelope, then adds each model's delta (`$3` model ids, `$4`… `$7` the totals) to its
 * row, a model not charged before taking the next position (two charges of one envelope that
 * bring new models at the same moment may share a position; their ids order them). Nothing when
 * there is no such envelope.
 */
const CHARGE_MODELS = `WITH envelope AS (
  SELECT 1 FROM envelopes WHERE tenant_id = $1 AND envelope_id = $2 FOR UPDATE
)
${INSERT_MODEL_COSTS}
SELECT $1, $2, d.model_id,
  (SELECT coalesce(max(position), 0) FROM envelope_model_costs WHERE tenant_id = $1 AND envelope_id = $2) + d.n,
  ${BOUNDED_MODEL_DELTAS}
FROM unnest($3::text[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[])
  WITH ORDINALITY AS d(model_id, input_tokens, output_tokens, cost_micros, call_count, n)
WHERE EXISTS (SELECT 1 FROM envelope)
${ADD_TO_MODEL_COSTS}`;

/**
 * CHARGE for many envelopes (`$2` their ids, `$3`… `$7` the totals, `$8` each one's `updated_at`),
 * each named once.
 */
const CHARGE_MANY = `UPDATE envelopes AS e SET
  ${TOTALS.map(([c, max]) => `${c} = LEAST(e.${c} + d.${c}, ${max})`).join(',\n  ')},
  updated_at = d.updated_at
FROM unnest($2::text[], ${TOTALS.map((_, i) => `$${i + 3}::bigint[]`).join(', ')}, $8::text[])
  AS d(envelope_id, ${TOTALS.map(([c]) => c).join(', ')}, updated_at)
WHERE e.tenant_id = $1 AND e.envelope_id = d.envelope_id`;

/**
 * CHARGE_MODELS for many envelopes, already locked (`$2` the envelope of each row, `$3` its model,
 * `$4`… `$7` the totals, `$8` its place among its envelope's rows), each model once per envelope.
 */
const CHARGE_MANY_MODELS = `${INSERT_MODEL_COSTS}
SELECT $1, d.envelope_id, d.model_id,
  (SELECT coalesce(max(position), 0) FROM envelope_model_costs WHERE tenant_id = $1 AND envelope_id = d.envelope_id) + d.n,
  ${BOUNDED_MODEL_DELTAS}
FROM unnest($2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[], $8::int[])
  AS d(envelope_id, model_id, input_tokens, output_tokens, cost_micros, call_count, n)
WHERE EXISTS (SELECT 1 FROM envelopes e WHERE e.tenant_id = $1 AND e.envelope_id = d.envelope_id)
${ADD_TO_MODEL_COSTS}`;

/**
 * The single insert's statement for many envelopes at once, in the order of their arrays (`$2` the
 * ids, then the columns, `$14` the documents, `$15` the execution ids, `$16` the creation times):
 * an execution id goes to the first stored envelope that names it, unless another had it before.
 * Returns the ids stored.
 */
const INSERT_MANY = `WITH d AS (
  SELECT * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::boolean[],
    ${TOTALS.map((_, i) => `$${i + 9}::bigint[]`).join(', ')}, $14::json[], $15::text[], $16::text[])
    WITH ORDINALITY AS d(envelope_id, budget_id, status, status_reason, updated_at, completed_at, ended,
      ${TOTALS.map(([c]) => c).join(', ')}, doc, execution_id, created_at, n)
), env AS (
  INSERT INTO envelopes (tenant_id, envelope_id, budget_id, status, status_reason, updated_at, completed_at,
    ended, ${TOTALS.map(([c]) => c).join(', ')}, doc, created_at)
  SELECT $1, envelope_id, budget_id, status, status_reason, updated_at, completed_at,
    ended, ${TOTALS.map(([c]) => c).join(', ')}, doc, created_at
  FROM d ORDER BY n
  ON CONFLICT DO NOTHING RETURNING envelope_id
), exe AS (
  INSERT INTO executions (tenant_id, execution_id, envelope_id)
  SELECT $1, d.execution_id, d.envelope_id FROM d JOIN env USING (envelope_id) ORDER BY d.n
  ON CONFLICT DO NOTHING
)
SELECT envelope_id FROM env`;

/** The model costs as the arrays CHARGE_MODELS takes. */
function modelColumns(models: readonly ModelCost[]): unknown[] {
  return [models.map((m) => m.model_id), ...MODEL_TOTALS.map(([c]) => models.map((m) => m[c]))];
}

export class PgEnvelopes implements EnvelopeRepository {
  readonly #sql: Sql;

  constructor(sql: Sql) {
    this.#sql = sql;
  }

  async get(tenant: string, envelopeId: string): Promise<Envelope | undefined> {
    const { rows } = await this.#sql.query<Row>(`${SELECT} WHERE e.tenant_id = $1 AND e.envelope_id = $2`, [
      tenant,
      envelopeId,
    ]);
    return rows[0] === undefined ? undefined : envelopeOf(rows[0]);
  }
  async getMany(tenant: string, envelopeIds: readonly string[]): Promise<Envelope[]> {
    if (envelopeIds.length === 0) return [];
    const { rows } = await this.#sql.query<Row>(
      `${SELECT} WHERE e.tenant_id = $1 AND e.envelope_id = ANY($2::text[])`,
      [tenant, [...new Set(envelopeIds)]],
    );
    return rows.map(envelopeOf);
  }

  async getManyForUpdate(tenant: string, envelopeIds: readonly string[]): Promise<Envelope[]> {
    if (envelopeIds.length === 0) return [];
    await this.#sql.query(
      `SELECT 1 FROM envelopes WHERE tenant_id = $1 AND envelope_id = ANY($2::text[])
       ORDER BY envelope_id FOR UPDATE`,
      [tenant, [...new Set(envelopeIds)]],
    );
    // Read once they are held: a read in the locking statement would see their model costs as
    // they were before it waited for a lock.
    return this.getMany(tenant, envelopeIds);
  }

  async list(tenant: string, filter: EnvelopeFilter, request?: PageRequest): Promise<Page<Envelope>> {
    const { size, after } = pageStart<string>(request, 'string');
    const { rows } = await this.#sql.query<Row>(
      `${SELECT} WHERE e.tenant_id = $1 AND ($2::text IS NULL OR e.envelope_id > $2)
         AND ($3::text IS NULL OR e.status = $3) AND ($4::text IS NULL OR e.budget_id = $4)
       ORDER BY e.envelope_id LIMIT $5`,
      [tenant, after, filter.status ?? null, filter.budgetId ?? null, size + 1],
    );
    return pageOf(rows, size, (r) => r.envelope_id, envelopeOf);
  }

  async listNewest(
    tenant: string,
    filter: { statuses?: readonly EnvelopeStatus[] | undefined },
    request?: PageRequest,
  ): Promise<Page<Envelope>> {
    const { size, after } = pageStart<string>(request, 'string');
    // The key is `<created_at>/<envelope_id>`; a creation time holds no '/'.
    const cut = after === null ? -1 : after.indexOf('/');
    const { rows } = await this.#sql.query<Row>(
      `${SELECT} WHERE e.tenant_id = $1 AND ($2::text IS NULL OR (e.created_at, e.envelope_id) < ($2, $3))
         AND ($4::text[] IS NULL OR e.status = ANY($4::text[]))
       ORDER BY e.created_at DESC, e.envelope_id DESC LIMIT $5`,
      [
        tenant,
        after === null ? null : after.slice(0, cut),
        after === null ? null : after.slice(cut + 1),
        filter.statuses ?? null,
        size + 1,
      ],
    );
    return pageOf(rows, size, (r) => envelopeTimeKey(r.doc), envelopeOf);
  }

  async listLive(tenant: string, budgetId: string, request?: PageRequest): Promise<Page<Envelope>> {
    const { size, after } = pageStart<string>(request, 'string');
    const { rows } = await this.#sql.query<Row>(
      `${SELECT} WHERE e.tenant_id = $1 AND e.budget_id = $2 AND NOT e.ended
         AND ($3::text IS NULL OR e.envelope_id > $3)
       ORDER BY e.envelope_id LIMIT $4`,
      [tenant, budgetId, after, size + 1],
    );
    return pageOf(rows, size, (r) => r.envelope_id, envelopeOf);
  }

  async insert(tenant: string, envelope: Envelope, options: { executionTaken: 'refuse' | 'keep' }): Promise<boolean> {
    const { cost } = envelope;
    const { rows } = await this.#sql.query<{ inserted: number; claimed: number }>(
      `WITH env AS (
         INSERT INTO envelopes (tenant_id, envelope_id, budget_id, status, status_reason, updated_at, completed_at,
           ended, tokens_input, tokens_output, cost_micros, llm_calls, tool_calls, doc, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $16) ON CONFLICT DO NOTHING
         RETURNING envelope_id
       ), exe AS (
         INSERT INTO executions (tenant_id, execution_id, envelope_id) SELECT $1, $15, envelope_id FROM env
         ON CONFLICT DO NOTHING RETURNING 1
       )
       SELECT (SELECT count(*) FROM env)::int AS inserted, (SELECT count(*) FROM exe)::int AS claimed`,
      [
        tenant,
        envelope.envelope_id,
        envelope.budget_id,
        envelope.status,
        envelope.status_reason,
        envelope.updated_at,
        envelope.completed_at,
        isFinal(envelope.status),
        cost.tokens_input,
        cost.tokens_output,
        cost.cost_micros,
        cost.llm_calls,
        cost.tool_calls,
        JSON.stringify(envelope),
        envelope.execution_id,
        envelope.created_at,
      ],
    );
    const { inserted, claimed } = rows[0]!;
    if (inserted === 0) return false;
    if (claimed === 0 && options.executionTaken === 'refuse') {
      // Nothing of the refused insert stays, even should the caller go on with the transaction.
      await this.#sql.query('DELETE FROM envelopes WHERE tenant_id = $1 AND envelope_id = $2', [
        tenant,
        envelope.envelope_id,
      ]);
      throw taken(
        'execution_id',
        envelope.execution_id,
        `execution ${envelope.execution_id} already has an envelope`,
        'already has an envelope',
      );
    }
    if (cost.model_costs.length > 0)
      await this.#sql.query(CHARGE_MODELS, [tenant, envelope.envelope_id, ...modelColumns(cost.model_costs)]);
    return true;
  }

  async charge(
    tenant: string,
    envelopeId: string,
    delta: CostTotals,
    overflow: Overflow,
    updatedAt: string,
  ): Promise<Envelope | undefined> {
    if (overflow === 'refuse') {
      // Locked, then checked whole before anything changes: no other charge of the envelope
      // comes between the check and the change.
      const { rows } = await this.#sql.query<Row>(
        `${SELECT} WHERE e.tenant_id = $1 AND e.envelope_id = $2 FOR UPDATE OF e`,
        [tenant, envelopeId],
      );
      if (rows[0] === undefined) return undefined;
      addCost(envelopeOf(rows[0]).cost, delta, 'refuse');
    }
    // Locked first (with the models, or on its own): what CHARGE returns is then current.
    if (delta.model_costs.length > 0)
      await this.#sql.query(CHARGE_MODELS, [tenant, envelopeId, ...modelColumns(mergeModels(delta.model_costs))]);
    else if (overflow !== 'refuse')
      await this.#sql.query('SELECT 1 FROM envelopes WHERE tenant_id = $1 AND envelope_id = $2 FOR UPDATE', [
        tenant,
        envelopeId,
      ]);
    const { rows } = await this.#sql.query<Row>(CHARGE, [
      tenant,
      envelopeId,
      ...TOTALS.map(([c]) => delta[c]),
      updatedAt,
    ]);
    return rows[0] === undefined ? undefined : envelopeOf(rows[0]);
  }

  async insertMany(tenant: string, envelopes: readonly Envelope[]): Promise<string[]> {
    // An id's first envelope is the one stored; the others are left out, as if it existed.
    const seen = new Set<string>();
    const first = envelopes.filter((e) => !seen.has(e.envelope_id) && seen.add(e.envelope_id));
    if (first.length === 0) return [];
    const column = <T>(read: (envelope: Envelope) => T) => first.map(read);
    const { rows } = await this.#sql.query<{ envelope_id: string }>(INSERT_MANY, [
      tenant,
      column((e) => e.envelope_id),
      column((e) => e.budget_id),
      column((e) => e.status),
      column((e) => e.status_reason),
      column((e) => e.updated_at),
      column((e) => e.completed_at),
      column((e) => isFinal(e.status)),
      ...TOTALS.map(([c]) => column((e) => e.cost[c])),
      column((e) => JSON.stringify(e)),
      column((e) => e.execution_id),
      column((e) => e.created_at),
    ]);
    const stored = new Set(rows.map((row) => row.envelope_id));
    await this.#chargeModels(
      tenant,
      first.filter((e) => stored.has(e.envelope_id)).map((e) => ({ envelopeId: e.envelope_id, delta: e.cost })),
    );
    return first.flatMap((e) => (stored.has(e.envelope_id) ? [e.envelope_id] : []));
  }

  async chargeMany(tenant: string, charges: readonly EnvelopeCharge[]): Promise<void> {
    if (charges.length === 0) return;
    await this.#chargeModels(tenant, charges);
    await this.#sql.query(CHARGE_MANY, [
      tenant,
      charges.map((c) => c.envelopeId),
      ...TOTALS.map(([c]) => charges.map((charge) => charge.delta[c])),
      charges.map((c) => c.updatedAt),
    ]);
  }

  /** Adds each charge's per-model costs (one statement for all, none when there are none). */
  async #chargeModels(
    tenant: string,
    charges: readonly { envelopeId: string; delta: Pick<CostTotals, 'model_costs'> }[],
  ): Promise<void> {
    const models = charges.flatMap(({ envelopeId, delta }) =>
      mergeModels(delta.model_costs).map((model, i) => ({ envelopeId, model, n: i + 1 })),
    );
    if (models.length === 0) return;
    await this.#sql.query(CHARGE_MANY_MODELS, [
      tenant,
      models.map((m) => m.envelopeId),
      ...modelColumns(models.map((m) => m.model)),
      models.map((m) => m.n),
    ]);
  }

  async transition(
    tenant: string,
    envelopeId: string,
    from: EnvelopeStatus,
    change: StatusChange,
  ): Promise<Envelope | undefined> {
    // Read after the change, not returned by it: had the update waited for the row's lock, what it
    // returned of the per-model costs would be as of before the wait.
    return (await this.changeStatus(tenant, envelopeId, from, change)) ? this.get(tenant, envelopeId) : undefined;
  }

  async changeStatus(tenant: string, envelopeId: string, from: EnvelopeStatus, change: StatusChange): Promise<boolean> {
    const { rowCount } = await this.#sql.query(
      `UPDATE envelopes SET status = $4, status_reason = $5, updated_at = $6, completed_at = $7, ended = $8
       WHERE tenant_id = $1 AND envelope_id = $2 AND status = $3`,
      [
        tenant,
        envelopeId,
        from,
        change.status,
        change.status_reason,
        change.updated_at,
        change.completed_at,
        isFinal(change.status),
      ],
    );
    return rowCount !== 0;
  }
}

/** One delta per model (an INSERT … ON CONFLICT changes a row once per statement). */
function mergeModels(models: readonly ModelCost[]): ModelCost[] {
  const merged = new Map<string, ModelCost>();
  for (const m of models) {
    const seen = merged.get(m.model_id);
    merged.set(
      m.model_id,
      seen === undefined
        ? m
        : {
            model_id: m.model_id,
            input_tokens: seen.input_tokens + m.input_tokens,
            output_tokens: seen.output_tokens + m.output_tokens,
            cost_micros: seen.cost_micros + m.cost_micros,
            call_count: seen.call_count + m.call_count,
          },
    );
  }
  return [...merged.values()];
}
