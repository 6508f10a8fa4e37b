import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { PredictCostRequestSchema } from '../../core/brain/index.ts';
import { BudgetSchema, type Budget } from '../../core/domain/index.ts';
import type { TokenCounter } from '../../core/metering/tokens.ts';
import type { Budgets } from '../budgets/budgets.ts';
import type { StoredEvent } from '../storage/records.ts';
import type { Readers } from '../storage/storage.ts';
import { CostPredictor } from './cost-prediction.ts';
import { Oracle } from './oracle.ts';

setFlagsFromString('--expose-gc');
const collectGarbage = runInNewContext('gc') as () => void;

const HOUR = 3_600_000;
const NOW = Date.parse('2026-11-23T12:00:00.000Z');
const DAY_START = Date.parse('2026-11-23T00:00:00.000Z');
const BUDGET_ID = '00000000-0000-4000-8000-000000000001';
const PAGES = 6;
const PAGE = 100;
const BLOB = 'x'.repeat(10_000);

/**
 * A store of PAGES pages of events with payloads, made as they are asked for. Before it hands out
 * a page it collects garbage and counts the events of the pages before the previous one that are
 * still alive: the reader holds one page at a time, so any of those alive is kept by the caller.
 */
function store(): { read: Readers; keptAtMost: () => number } {
  const pages: WeakRef<StoredEvent>[][] = [];
  let kept = 0;
  const list = async (_tenant: string, _filter: unknown, page?: { pageToken?: string | null }) => {
    const index = Number(page?.pageToken ?? 0);
    // A WeakRef holds its target until the end of the task that made it.
    await new Promise((resolve) => setImmediate(resolve));
    collectGarbage();
    const old = pages.slice(0, Math.max(0, index - 1)).flat();
    kept = Math.max(kept, old.filter((ref) => ref.deref() !== undefined).length);
    const items = Array.from({ length: PAGE }, (_, i) => event(NOW - ((index * PAGE + i + 1) * HOUR) / 1000));
    pages[index] = items.map((e) => new WeakRef(e));
    return { items, nextPageToken: index + 1 < PAGES ? String(index + 1) : null };
  };
  return { read: { events: { list } } as unknown as Readers, keptAtMost: () => kept };
}

function event(at: number): StoredEvent {
  const iso = new Date(at).toISOString();
  return {
    event_id: `e-${at}`,
    tenant_id: 't',
    envelope_id: 'env',
    budget_id: BUDGET_ID,
    event_type: 'llm.call',
    timestamp: iso,
    tokens: { input: 10, output: 20 },
    model: 'gpt-4o-mini',
    cost_usd: 0.01,
    payload: { blob: `${BLOB}${at}` },
    source: 'proxy:p',
    cost_micros: 10_000,
    received_at: iso,
  };
}

const budget: Budget = BudgetSchema.parse({
  budget_id: BUDGET_ID,
  tenant_id: 't',
  name: 'b',
  description: '',
  type: 'cost',
  period: 'daily',
  limits: { max_cost_usd: 100 },
  alerts: [],
  expires_at: null,
  workflow_id: null,
  tags: {},
  usage: {
    period_start: new Date(DAY_START).toISOString(),
    period_end: new Date(DAY_START + 24 * HOUR).toISOString(),
    tokens_input: 0,
    tokens_output: 0,
    cost_micros: 6_000_000,
    executions: 0,
    llm_calls: 600,
    tool_calls: 0,
    alerts_fired: [],
  },
  created_at: new Date(DAY_START - HOUR).toISOString(),
  updated_at: new Date(DAY_START).toISOString(),
});

const budgets = {
  list: () => Promise.resolve([budget]),
  get: () => Promise.resolve(budget),
} as unknown as Budgets;

function oracle(read: Readers): Oracle {
  return new Oracle({
    read,
    budgets,
    envelopes: { get: () => Promise.reject(new Error('no envelopes here')) },
    clock: () => new Date(NOW),
    lookbackPeriods: 0,
    maxEvents: 20_000,
  });
}

describe('a prediction over stored events', () => {
  it('keeps what the Oracle uses of each event, not the event: one page of payloads at a time', async () => {
    const { read, keptAtMost } = store();
    const prediction = await oracle(read).predict(budget);
    expect(prediction.sample_size).toBe(PAGES * PAGE);
    expect(keptAtMost()).toBe(0);
  });

  it('keeps the model and output length of each call for the cost prediction, not the event', async () => {
    const { read, keptAtMost } = store();
    const predictor = new CostPredictor({
      read,
      budgets,
      oracle: oracle(read),
      pricer: () => ({ costMicros: 1, known: true }),
      tokens: {} as TokenCounter,
      clock: () => new Date(NOW),
      maxEvents: 20_000,
    });
    const request = PredictCostRequestSchema.parse({ model_ids: ['gpt-4o-mini'], estimated_input_tokens: 100 });
    const prediction = await predictor.predict('t', request);
    expect(prediction.sample_size).toBe(PAGES * PAGE);
    expect(keptAtMost()).toBe(0);
  });
});
