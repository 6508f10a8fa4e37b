import type { RecentAction } from './sequences.ts';
import { BoundedLru } from '../../resilience/bounded-lru.ts';

export interface ActionHistoryOptions {
  /** Earlier actions older than this no longer count (the sequence rules' time window). */
  windowMs: number;
  /** Executions remembered at once; the least recently active is forgotten first. */
  maxExecutions: number;
  now?: () => number;
}

/** Actions remembered per execution, and the characters of arguments kept of each. */
const PER_EXECUTION = 16;
const ARGS_CHARS = 2048;

/**
 * The proxy's memory of what each execution's tool calls did, for the Immune System's sequence
 * rules: the allowed tool calls of the last `windowMs`, newest last, bounded per execution and
 * in executions, so a hostile agent cannot grow it.
 */
export class ActionHistory {
  readonly #executions: BoundedLru<string, RecentAction[]>;
  readonly #windowMs: number;
  readonly #now: () => number;

  constructor(options: ActionHistoryOptions) {
    this.#executions = new BoundedLru(options.maxExecutions);
    this.#windowMs = options.windowMs;
    this.#now = options.now ?? Date.now;
  }

  /** The execution's actions still inside the window, oldest first. */
  recent(executionId: string): RecentAction[] {
    const kept = this.#executions.get(executionId);
    if (kept === undefined) return [];
    const since = this.#now() - this.#windowMs;
    return kept.filter((a) => a.at >= since);
  }

  record(executionId: string, action: string, toolName: string, toolArgs: string): void {
    const since = this.#now() - this.#windowMs;
    const kept = (this.#executions.get(executionId) ?? []).filter((a) => a.at >= since);
    kept.push({
      action,
      tool_name: toolName.slice(0, 256),
      tool_args: toolArgs.slice(0, ARGS_CHARS),
      at: this.#now(),
    });
    this.#executions.set(executionId, kept.slice(-PER_EXECUTION));
  }
}
