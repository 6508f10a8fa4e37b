import {
  addUsage,
  MAX_TOKEN_TOTAL,
  MAX_TOTAL,
  type Budget,
  type Overflow,
  type UsageDelta,
} from '../../../core/domain/index.ts';
import { taken } from '../conflict.ts';
import type { BudgetDefinition, BudgetRepository, Page, PageRequest, PeriodWindow } from '../storage.ts';
import { usageIn } from '../totals.ts';
import { pageOf, pageStart } from './pages.ts';
import { int, type Sql } from './sql.ts';

interface Row {
  budget_id: string;
  doc: Budget;
  updated_at: string;
  period_start: string;
  period_end: string | null;
  tokens_input: string;
  tokens_output: string;
  cost_micros: string;
  executions: string;
  llm_calls: string;
  tool_calls: string;
  alerts_fired: number[];
}

/** The usage counters, in the order of their parameters, each with its maximum. */
const COUNTERS = [
  ['tokens_input', MAX_TOKEN_TOTAL],
  ['tokens_output', MAX_TOKEN_TOTAL],
  ['cost_micros', MAX_TOTAL],
  ['executions', MAX_TOTAL],
  ['llm_calls', MAX_TOTAL],
  ['tool_calls', MAX_TOTAL],
] as const satisfies ReadonlyArray<readonly [keyof UsageDelta, number]>;

const COLUMNS =
  'budget_id, doc, updated_at, period_start, period_end, tokens_input, tokens_output, cost_micros, executions, llm_calls, tool_calls, alerts_fired';

function budgetOf(row: Row): Budget {
  return {
    ...row.doc,
    usage: {
      period_start: row.period_start,
      period_end: row.period_end,
      tokens_input: int(row.tokens_input),
      tokens_output: int(row.tokens_output),
      cost_micros: int(row.cost_micros),
      executions: int(row.executions),
      llm_calls: int(row.llm_calls),
      tool_calls: int(row.tool_calls),
      alerts_fired: row.alerts_fired,
    },
    updated_at: row.updated_at,
  };
}

/*
 * Period roll-over inside the statements: `$3` is the start of the period the change counts in,
 * `$4` its end. Usage stored for an earlier period counts as zero and takes the new period; usage
 * of the same or a later one is added to. Evaluated on the row version the UPDATE locks, so
 * concurrent changes of several replicas add up.
 */
const KEEP = '(period_start::timestamptz >= $3::text::timestamptz)';
const base = (column: string) => `(CASE WHEN ${KEEP} THEN ${column} ELSE 0 END)`;
const ROLL_OVER = `period_start = CASE WHEN ${KEEP} THEN period_start ELSE $3::text END,
  period_end = CASE WHEN ${KEEP} THEN period_end ELSE $4::text END,
  alerts_fired = CASE WHEN ${KEEP} THEN alerts_fired ELSE '{}' END`;

/** Adds `$5`… `$10` to the counters, held at their maxima; `$12` refuses a change past one instead. */
const ADD_USAGE = `UPDATE budgets SET ${ROLL_OVER},
  ${COUNTERS.map(([c, max], i) => `${c} = LEAST(${base(c)} + $${i + 5}::bigint, ${max})`).join(',\n  ')},
  updated_at = $11
WHERE tenant_id = $1 AND budget_id = $2
  AND (NOT $12::boolean OR (${COUNTERS.map(([c, max], i) => `${base(c)} + $${i + 5}::bigint <= ${max}`).join(' AND ')}))
RETURNING ${COLUMNS}`;

const MAX_EXECUTIONS = `(doc->'limits'->>'max_executions')::bigint`;
const RESERVE_EXECUTION = `UPDATE budgets SET ${ROLL_OVER},
  tokens_input = ${base('tokens_input')}, tokens_output = ${base('tokens_output')},
  cost_micros = ${base('cost_micros')}, llm_calls = ${base('llm_calls')}, tool_calls = ${base('tool_calls')},
  executions = ${base('executions')} + 1,
  updated_at = $5
WHERE tenant_id = $1 AND budget_id = $2 AND (${MAX_EXECUTIONS} IS NULL OR ${base('executions')} < ${MAX_EXECUTIONS})
RETURNING ${COLUMNS}`;

/** A statement that found the row but changed nothing may have raced a roll-over: tried again this often. */
const ATTEMPTS = 5;

export class PgBudgets implements BudgetRepository {
  readonly #sql: Sql;

  constructor(sql: Sql) {
    this.#sql = sql;
  }

  async get(tenant: string, budgetId: string): Promise<Budget | undefined> {
    const { rows } = await this.#sql.query<Row>(
      `SELECT ${COLUMNS} FROM budgets WHERE tenant_id = $1 AND budget_id = $2`,
      [tenant, budgetId],
    );
    return rows[0] === undefined ? undefined : budgetOf(rows[0]);
  }

  async list(tenant: string, request?: PageRequest): Promise<Page<Budget>> {
    const { size, after } = pageStart<string>(request, 'string');
    const { rows } = await this.#sql.query<Row>(
      `SELECT ${COLUMNS} FROM budgets WHERE tenant_id = $1 AND ($2::text IS NULL OR budget_id > $2)
       ORDER BY budget_id LIMIT $3`,
      [tenant, after, size + 1],
    );
    return pageOf(rows, size, (r) => r.budget_id, budgetOf);
  }

  async insert(tenant: string, budget: Budget): Promise<void> {
    const { usage } = budget;
    const { rowCount } = await this.#sql.query(
      `INSERT INTO budgets (tenant_id, budget_id, updated_at, period_start, period_end, tokens_input, tokens_output,
         cost_micros, executions, llm_calls, tool_calls, alerts_fired, doc)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) ON CONFLICT DO NOTHING`,
      [
        tenant,
        budget.budget_id,
        budget.updated_at,
        usage.period_start,
        usage.period_end,
        usage.tokens_input,
        usage.tokens_output,
        usage.cost_micros,
        usage.executions,
        usage.llm_calls,
        usage.tool_calls,
        usage.alerts_fired,
        JSON.stringify(budget),
      ],
    );
    if (rowCount === 0) throw taken('budget_id', budget.budget_id, `budget ${budget.budget_id} already exists`);
  }

  async remove(tenant: string, budgetId: string): Promise<boolean> {
    const { rowCount } = await this.#sql.query('DELETE FROM budgets WHERE tenant_id = $1 AND budget_id = $2', [
      tenant,
      budgetId,
    ]);
    return (rowCount ?? 0) > 0;
  }

  async getForUpdate(tenant: string, budgetId: string): Promise<Budget | undefined> {
    const { rows } = await this.#sql.query<Row>(
      `SELECT ${COLUMNS} FROM budgets WHERE tenant_id = $1 AND budget_id = $2 FOR UPDATE`,
      [tenant, budgetId],
    );
    return rows[0] === undefined ? undefined : budgetOf(rows[0]);
  }

  async getManyForUpdate(tenant: string, budgetIds: readonly string[]): Promise<Budget[]> {
    if (budgetIds.length === 0) return [];
    // What the lock waited for is read: the row is read again once locked.
    const { rows } = await this.#sql.query<Row>(
      `SELECT ${COLUMNS} FROM budgets WHERE tenant_id = $1 AND budget_id = ANY($2::text[])
       ORDER BY budget_id FOR UPDATE`,
      [tenant, [...new Set(budgetIds)]],
    );
    return rows.map(budgetOf);
  }

  async addUsage(
    tenant: string,
    budgetId: string,
    delta: UsageDelta,
    period: PeriodWindow,
    overflow: Overflow,
    updatedAt: string,
  ): Promise<Budget | undefined> {
    for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
      const { rows } = await this.#sql.query<Row>(ADD_USAGE, [
        tenant,
        budgetId,
        period.start,
        period.end,
        ...COUNTERS.map(([c]) => delta[c]),
        updatedAt,
        overflow === 'refuse',
      ]);
      if (rows[0] !== undefined) return budgetOf(rows[0]);
      const budget = await this.get(tenant, budgetId);
      if (budget === undefined) return undefined;
      // Refused past a maximum: the refusal names the total, as every backend's does.
      addUsage(usageIn(budget.usage, period), delta, 'refuse');
    }
    throw new Error(`budget ${budgetId}: usage change kept racing other writers`);
  }

  async redefine(
    tenant: string,
    budgetId: string,
    definition: BudgetDefinition,
    updatedAt: string,
  ): Promise<Budget | undefined> {
    // The definition's keys replace those of the stored document; the usage columns stay.
    const { rows } = await this.#sql.query<Row>(
      `UPDATE budgets SET doc = (doc::jsonb || $3::jsonb)::json, updated_at = $4
       WHERE tenant_id = $1 AND budget_id = $2 RETURNING ${COLUMNS}`,
      [tenant, budgetId, JSON.stringify(definition), updatedAt],
    );
    const [row] = rows;
    return row === undefined ? undefined : budgetOf(row);
  }

  async reserveExecution(
    tenant: string,
    budgetId: string,
    period: PeriodWindow,
    updatedAt: string,
  ): Promise<{ reserved: boolean; budget: Budget } | undefined> {
    for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
      const { rows } = await this.#sql.query<Row>(RESERVE_EXECUTION, [
        tenant,
        budgetId,
        period.start,
        period.end,
        updatedAt,
      ]);
      if (rows[0] !== undefined) return { reserved: true, budget: budgetOf(rows[0]) };
      const budget = await this.get(tenant, budgetId);
      if (budget === undefined) return undefined;
      const usage = usageIn(budget.usage, period);
      const max = budget.limits.max_executions;
      if (max !== null && usage.executions >= max) return { reserved: false, budget: { ...budget, usage } };
    }
    throw new Error(`budget ${budgetId}: execution reservation kept racing other writers`);
  }

  async markAlertsFired(
    tenant: string,
    budgetId: string,
    periodStart: string,
    percents: readonly number[],
  ): Promise<number[]> {
    // The row stays locked until the transaction ends: no other marker reads it in between.
    const { rows } = await this.#sql.query<{ period_start: string; alerts_fired: number[] }>(
      'SELECT period_start, alerts_fired FROM budgets WHERE tenant_id = $1 AND budget_id = $2 FOR UPDATE',
      [tenant, budgetId],
    );
    const row = rows[0];
    if (row === undefined || row.period_start !== periodStart) return [];
    const added = [...new Set(percents)].filter((p) => !row.alerts_fired.includes(p));
    if (added.length > 0)
      await this.#sql.query(
        'UPDATE budgets SET alerts_fired = alerts_fired || $3::integer[] WHERE tenant_id = $1 AND budget_id = $2',
        [tenant, budgetId, added],
      );
    return added;
  }
}
