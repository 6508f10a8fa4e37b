import { setImmediate as turn } from 'node:timers/promises';
import { microsToUsd } from '../../core/domain/index.ts';
import type { Page, PageRequest, Readers } from '../storage/storage.ts';

/** At most this many records are read per summary: a bounded answer, marked `truncated` beyond it. */
export const SUMMARY_SCAN_LIMIT = 10_000;
const SCAN_PAGE_SIZE = 100;

export interface SummaryWindow {
  /** Inclusive; absent means from the first record. */
  start?: Date | undefined;
  /** Exclusive; absent means up to now. */
  end?: Date | undefined;
}

interface Tally {
  events: number;
  tokens_input: number;
  tokens_output: number;
  cost_usd: number;
}

export interface UsageSummary {
  events: number;
  tokens_input: number;
  tokens_output: number;
  tokens_total: number;
  cost_usd: number;
  by_model: Array<Tally & { model: string }>;
  by_event_type: Array<Tally & { event_type: string }>;
  truncated: boolean;
}

export interface PolicySummary {
  evaluations: number;
  /** Decisions that refused the action: DENY and REQUIRE_APPROVAL. */
  denials: number;
  by_decision: Record<string, number>;
  by_action: Array<{ action: string; evaluations: number; denials: number }>;
  truncated: boolean;
}

/**
 * Newest-first records of a list inside the window: stops at the first one older than `start`,
 * or after SUMMARY_SCAN_LIMIT records or as many storage pages as those fill (then true: the
 * answer is truncated). A filtered list may answer pages short, even empty, with a token: the
 * pages are counted too, or a filter that matches little would walk the whole log.
 */
export async function scan<T>(
  list: (page: PageRequest) => Promise<Page<T>>,
  timeOf: (item: T) => string,
  window: SummaryWindow,
  visit: (item: T) => void,
): Promise<boolean> {
  let read = 0;
  let pages = 0;
  let pageToken: string | null = null;
  do {
    if (pages === SUMMARY_SCAN_LIMIT / SCAN_PAGE_SIZE) return true;
    pages += 1;
    const page: Page<T> = await list({ pageSize: SCAN_PAGE_SIZE, pageToken });
    for (const item of page.items) {
      if (read >= SUMMARY_SCAN_LIMIT) return true;
      read += 1;
      const at = Date.parse(timeOf(item));
      if (window.start !== undefined && at < window.start.getTime()) return false;
      if (window.end === undefined || at < window.end.getTime()) visit(item);
    }
    pageToken = page.nextPageToken;
    // An LMDB page is read synchronously: the event loop runs between pages, not only after the scan.
    if (pageToken !== null) await turn();
  } while (pageToken !== null);
  return false;
}

function tally(into: Map<string, Tally>, key: string, add: Tally): void {
  const t = into.get(key) ?? { events: 0, tokens_input: 0, tokens_output: 0, cost_usd: 0 };
  t.events += add.events;
  t.tokens_input += add.tokens_input;
  t.tokens_output += add.tokens_output;
  t.cost_usd += add.cost_usd;
  into.set(key, t);
}

/** Totals of a tenant's recorded usage events (by arrival time) in a window, per model and type. */
export async function summariseUsage(read: Readers, tenant: string, window: SummaryWindow): Promise<UsageSummary> {
  const models = new Map<string, Tally>();
  const types = new Map<string, Tally>();
  const total: Tally = { events: 0, tokens_input: 0, tokens_output: 0, cost_usd: 0 };
  let micros = 0;
  const truncated = await scan(
    (page) => read.events.list(tenant, {}, page),
    (e) => e.received_at,
    window,
    (e) => {
      micros += e.cost_micros;
      const one = {
        events: 1,
        tokens_input: e.tokens.input,
        tokens_output: e.tokens.output,
        cost_usd: microsToUsd(e.cost_micros),
      };
      total.events += 1;
      total.tokens_input += one.tokens_input;
      total.tokens_output += one.tokens_output;
      tally(models, e.model ?? '(none)', one);
      tally(types, e.event_type, one);
    },
  );
  return {
    events: total.events,
    tokens_input: total.tokens_input,
    tokens_output: total.tokens_output,
    tokens_total: total.tokens_input + total.tokens_output,
    cost_usd: microsToUsd(micros),
    by_model: [...models].map(([model, t]) => ({ model, ...t })),
    by_event_type: [...types].map(([event_type, t]) => ({ event_type, ...t })),
    truncated,
  };
}

/** The tenant's control-plane policy evaluations (from the audit log) in a window, per decision and action. */
export async function summarisePolicy(read: Readers, tenant: string, window: SummaryWindow): Promise<PolicySummary> {
  const byDecision: Record<string, number> = {};
  const byAction = new Map<string, { evaluations: number; denials: number }>();
  let evaluations = 0;
  let denials = 0;
  const truncated = await scan(
    (page) => read.audit.list(tenant, { order: 'newest', action: 'policy.evaluate' }, page),
    (r) => r.timestamp,
    window,
    (r) => {
      const decision = r.result.toUpperCase();
      const denied = decision === 'DENY' || decision === 'REQUIRE_APPROVAL';
      const action = typeof r.metadata.action === 'string' ? r.metadata.action : r.resource.id;
      evaluations += 1;
      if (denied) denials += 1;
      byDecision[decision] = (byDecision[decision] ?? 0) + 1;
      const a = byAction.get(action) ?? { evaluations: 0, denials: 0 };
      a.evaluations += 1;
      if (denied) a.denials += 1;
      byAction.set(action, a);
    },
  );
  return {
    evaluations,
    denials,
    by_decision: byDecision,
    by_action: [...byAction].map(([action, a]) => ({ action, ...a })),
    truncated,
  };
}

export const SPEND_GROUPS = ['model', 'day', 'week', 'month', 'workflow'] as const;
export type SpendGroup = (typeof SPEND_GROUPS)[number];

/** Spend over a window: cost kept in micro-dollars while summing, so totals are exact. */
export interface Spend {
  tokens_input: number;
  tokens_output: number;
  cost_micros: number;
  llm_calls: number;
  tool_calls: number;
  /** Distinct envelopes with an event in the window. */
  executions: number;
}

export interface SpendSummary {
  total: Spend;
  groups: Array<{ key: string; spend: Spend }>;
  truncated: boolean;
}

const day = (iso: string) => iso.slice(0, 10);

/** The UTC date a group of `by` starts on (YYYY-MM-DD), or the model or workflow. */
function groupKey(by: SpendGroup, at: string, model: string | null, workflow: string | null): string {
  if (by === 'model') return model ?? '';
  if (by === 'workflow') return workflow ?? '';
  if (by === 'month') return `${at.slice(0, 7)}-01`;
  if (by === 'day') return day(at);
  const date = new Date(`${day(at)}T00:00:00Z`);
  date.setUTCDate(date.getUTCDate() - ((date.getUTCDay() + 6) % 7));
  return day(date.toISOString());
}

/**
 * The tenant's spend from the usage events that arrived in a window, in total and per group (the
 * day, week and month of the event's own time); a workflow is the workflow of the event's
 * budget. Reads at most SUMMARY_SCAN_LIMIT events.
 */
export async function summariseSpend(
  read: Readers,
  tenant: string,
  query: SummaryWindow & { workflowId?: string | undefined; groupBy?: SpendGroup | undefined },
): Promise<SpendSummary> {
  const workflows = new Map<string, string | null>();
  const workflowOf = async (budgetId: string | null) => {
    if (budgetId === null) return null;
    if (!workflows.has(budgetId))
      workflows.set(budgetId, (await read.budgets.get(tenant, budgetId))?.workflow_id ?? null);
    return workflows.get(budgetId) ?? null;
  };
  const events: Array<{ at: string; model: string | null; budget: string | null; spend: Spend; envelope: string }> = [];
  const truncated = await scan(
    (page) => read.events.list(tenant, {}, page),
    // The list is in arrival order, so the window is of arrival times (as for summariseUsage).
    (e) => e.received_at,
    query,
    (e) =>
      events.push({
        at: new Date(e.timestamp).toISOString(),
        model: e.model,
        budget: e.budget_id,
        envelope: e.envelope_id,
        spend: {
          tokens_input: e.tokens.input,
          tokens_output: e.tokens.output,
          cost_micros: e.cost_micros,
          llm_calls: e.event_type.startsWith('llm.') ? 1 : 0,
          tool_calls: e.event_type.startsWith('tool.') ? 1 : 0,
          executions: 0,
        },
      }),
  );
  const zero = (): Spend & { envelopes: Set<string> } => ({
    tokens_input: 0,
    tokens_output: 0,
    cost_micros: 0,
    llm_calls: 0,
    tool_calls: 0,
    executions: 0,
    envelopes: new Set(),
  });
  const total = zero();
  const groups = new Map<string, ReturnType<typeof zero>>();
  for (const event of events) {
    const workflow = await workflowOf(event.budget);
    if (query.workflowId !== undefined && workflow !== query.workflowId) continue;
    const targets = [total];
    if (query.groupBy !== undefined) {
      const key = groupKey(query.groupBy, event.at, event.model, workflow);
      targets.push(groups.get(key) ?? groups.set(key, zero()).get(key)!);
    }
    for (const t of targets) {
      t.tokens_input += event.spend.tokens_input;
      t.tokens_output += event.spend.tokens_output;
      t.cost_micros += event.spend.cost_micros;
      t.llm_calls += event.spend.llm_calls;
      t.tool_calls += event.spend.tool_calls;
      t.envelopes.add(event.envelope);
    }
  }
  const done = ({ envelopes, ...spend }: ReturnType<typeof zero>): Spend => ({ ...spend, executions: envelopes.size });
  return {
    total: done(total),
    groups: [...groups].sort(([a], [b]) => a.localeCompare(b)).map(([key, spend]) => ({ key, spend: done(spend) })),
    truncated,
  };
}
