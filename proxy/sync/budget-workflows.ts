import type { Database, RootDatabase } from 'lmdb';
import { UNKNOWN_VALUE } from '../../core/policy/index.ts';
import type { BudgetState } from '../../core/sync/contract.ts';
import { writeInBackground, type StoreLogger } from '../store/index.ts';

const DB_NAME = 'budget-workflows';

interface KeptWorkflow {
  workflow_id: string | null;
}

/**
 * The workflow each budget this sidecar may charge is scoped to, as the control plane's budget
 * states say: the evaluation of every call charged to the budget reads it as `workflow_id`, as
 * the control plane's envelope creation does. A budget whose state this proxy has not heard (NATS
 * away since a first start, a control plane too old to say) gives `UNKNOWN_VALUE`, so that a rule
 * on the workflow fails closed there instead of never matching.
 *
 * Bounded by the budgets the sidecar may charge (`SVC_BUDGET_ID` and `SVC_ALLOWED_BUDGET_IDS`), and
 * kept in the proxy's LMDB store, so a proxy that restarts while NATS is away still knows them.
 */
export class BudgetWorkflows {
  readonly #budgets: ReadonlySet<string>;
  readonly #db: Database<KeptWorkflow, string>;
  readonly #logger: StoreLogger;
  readonly #known = new Map<string, string | null>();

  constructor(options: { budgetIds: Iterable<string>; store: RootDatabase; logger: StoreLogger }) {
    this.#budgets = new Set(options.budgetIds);
    this.#logger = options.logger;
    this.#db = options.store.openDB<KeptWorkflow, string>({ name: DB_NAME, encoding: 'json' });
    for (const { key, value } of this.#db.getRange()) {
      const workflow = value?.workflow_id;
      if (this.#budgets.has(key) && (typeof workflow === 'string' || workflow === null)) this.#known.set(key, workflow);
      else this.#write(key, undefined);
    }
  }

  /** The `workflow_id` of a call charged to the budget: absent when the budget names none. */
  of(budgetId: string): string | undefined | typeof UNKNOWN_VALUE {
    const workflow = this.#known.get(budgetId);
    if (workflow === undefined) return UNKNOWN_VALUE;
    return workflow ?? undefined;
  }

  /** Learns a budget's workflow from its state; a state that does not say makes it unknown again. */
  heard(state: BudgetState): void {
    const budgetId = state.budget_id;
    if (!this.#budgets.has(budgetId)) return;
    const workflow = state.workflow_id;
    if (workflow === this.#known.get(budgetId)) return;
    if (workflow === undefined) this.#known.delete(budgetId);
    else this.#known.set(budgetId, workflow);
    this.#write(budgetId, workflow);
  }

  #write(budgetId: string, workflow: string | null | undefined): void {
    writeInBackground(
      workflow === undefined ? this.#db.remove(budgetId) : this.#db.put(budgetId, { workflow_id: workflow }),
      this.#logger,
      { budget_id: budgetId },
      "budget's workflow not kept on disk: a restart without NATS would not know it",
    );
  }
}
