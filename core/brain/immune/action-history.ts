import type { CompiledRuleset } from '../../policy/engine.ts';
import { MAX_SEQUENCE_ACTIONS, type SequenceShape } from '../../policy/sequence.ts';
import { BoundedLru } from '../../resilience/bounded-lru.ts';
import type { BuiltinJudge } from '../builtin-judge.ts';
import type { RecentAction } from './sequences.ts';

export interface ActionHistoryOptions {
  /** Earlier actions older than this no longer count (the sequence rules' time window). */
  windowMs: number;
  /** Scopes remembered at once; the least recently active is forgotten first. */
  maxScopes: number;
  now?: () => number;
}

/** The last actions of a scope, kept whatever they did: what a sequence added later starts from. */
export const RECENT_ACTIONS = 16;
/**
 * The actions kept for the partial matches of the tracked sequences. A sequence of k steps keeps
 * at most k(k+1)/2 (its best partial match of each length); sequences beyond this are matched on
 * the last RECENT_ACTIONS only. With those, a history never gives more than a sequence reads.
 */
export const TRACKED_ACTIONS = MAX_SEQUENCE_ACTIONS - RECENT_ACTIONS;
const ARGS_CHARS = 2048;

interface Entry {
  readonly action: RecentAction;
  /** The order of recording: actions of one millisecond keep theirs. */
  readonly n: number;
}

/** The actions of a partial match, oldest first. */
type Chain = readonly Entry[];

interface ScopeMemory {
  recorded: number;
  recent: Entry[];
  /** Per sequence key, per number of steps matched (index + 1), the partial match that started last. */
  progress: Map<string, (Chain | undefined)[]>;
}

/**
 * What the allowed tool calls of each scope (whose actions can make one sequence) did, for the
 * sequences. Each scope keeps the last RECENT_ACTIONS actions of the window, and for every tracked
 * sequence the best partial match of each length, kept however many other actions come between:
 * harmless calls cannot push out the first step of a sequence, and matching ones replace a
 * partial match only by one that started later, which stays in the window longer. A sequence
 * matches the earlier actions in order within its window exactly when its complete partial match
 * started inside it, so what these give finds every match the whole window's actions would.
 * Bounded per scope (RECENT_ACTIONS + TRACKED_ACTIONS actions of at most ARGS_CHARS characters of
 * arguments) and in scopes, so a hostile agent cannot grow it.
 */
export class ActionHistory {
  readonly #scopes: BoundedLru<string, ScopeMemory>;
  readonly #windowMs: number;
  readonly #now: () => number;

  constructor(options: ActionHistoryOptions) {
    this.#scopes = new BoundedLru(options.maxScopes);
    this.#windowMs = options.windowMs;
    this.#now = options.now ?? Date.now;
  }

  /** The scope's actions still inside the window, oldest first: the last ones, and the partial matches. */
  recent(scope: string): RecentAction[] {
    const memory = this.#scopes.get(scope);
    if (memory === undefined) return [];
    const since = this.#now() - this.#windowMs;
    const kept = new Map<number, RecentAction>();
    for (const entry of memory.recent) if (entry.action.at >= since) kept.set(entry.n, entry.action);
    for (const chains of memory.progress.values())
      for (const chain of chains)
        if (chain !== undefined && startOf(chain) >= since) for (const entry of chain) kept.set(entry.n, entry.action);
    return [...kept.entries()].sort((a, b) => a[0] - b[0]).map(([, action]) => action);
  }

  /**
   * Records an allowed action, advancing the partial matches of `sequences` (the current ruleset's
   * and the built-in judge's, tracked in this order while TRACKED_ACTIONS holds them). A sequence
   * seen for the first time starts from the last actions; one no longer given is forgotten.
   */
  record(
    scope: string,
    done: { action: string; toolName: string; toolArgs: string },
    sequences: readonly SequenceShape[],
  ): void {
    const now = this.#now();
    const since = now - this.#windowMs;
    const memory: ScopeMemory = this.#scopes.get(scope) ?? {
      recorded: 0,
      recent: [],
      progress: new Map(),
    };
    memory.recent = memory.recent.filter((e) => e.action.at >= since);
    const entry: Entry = {
      action: {
        action: done.action.slice(0, 300),
        tool_name: done.toolName.slice(0, 256),
        tool_args: done.toolArgs.slice(0, ARGS_CHARS),
        at: now,
      },
      n: memory.recorded++,
    };
    const progress = new Map<string, (Chain | undefined)[]>();
    for (const sequence of tracked(sequences)) {
      const known = memory.progress
        .get(sequence.key)
        ?.map((c) => (c !== undefined && startOf(c) >= since ? c : undefined));
      const chains = known ?? replay(sequence, memory.recent);
      advance(chains, sequence, entry);
      progress.set(sequence.key, chains);
    }
    memory.progress = progress;
    memory.recent = [...memory.recent, entry].slice(-RECENT_ACTIONS);
    this.#scopes.set(scope, memory);
  }
}

function startOf(chain: Chain): number {
  return (chain[0] as Entry).action.at;
}

/** The sequences given, in order, while their partial matches fit in TRACKED_ACTIONS. */
function tracked(sequences: readonly SequenceShape[]): SequenceShape[] {
  let room = TRACKED_ACTIONS;
  const kept: SequenceShape[] = [];
  for (const sequence of sequences) {
    const holds = (sequence.steps.length * (sequence.steps.length + 1)) / 2;
    if (holds > room) continue;
    room -= holds;
    kept.push(sequence);
  }
  return kept;
}

/** The partial matches of a sequence new to the scope, from the actions it still remembers. */
function replay(sequence: SequenceShape, recent: readonly Entry[]): (Chain | undefined)[] {
  const chains: (Chain | undefined)[] = sequence.steps.map(() => undefined);
  for (const entry of recent) advance(chains, sequence, entry);
  return chains;
}

/**
 * Extends the partial matches by one action. Longest first, so that one action fills one step of
 * a match; of two matches of as many steps, the one that started later is kept, as it stays in
 * every window at least as long.
 */
function advance(chains: (Chain | undefined)[], sequence: SequenceShape, entry: Entry): void {
  for (let j = sequence.steps.length - 1; j >= 0; j--) {
    const before = j === 0 ? [] : chains[j - 1];
    if (before === undefined || !(sequence.steps[j] as (item: RecentAction) => boolean)(entry.action)) continue;
    const extended = [...before, entry];
    const current = chains[j];
    if (current === undefined || startOf(extended) >= startOf(current)) chains[j] = extended;
  }
}

/**
 * The sequences a history tracks, in this order: the built-in judge's (one action at most) when
 * the ruleset asks the judge, then the ruleset's own. The judge reads each allowed call for its
 * steps, a cost paid only where it judges; a rule that starts asking it starts from the last calls.
 */
export function sequencesToTrack(
  ruleset: Pick<CompiledRuleset, 'sequences' | 'needsJudge'> | null,
  builtin: Pick<BuiltinJudge, 'sequences'>,
): readonly SequenceShape[] {
  if (ruleset === null) return [];
  return ruleset.needsJudge ? [...builtin.sequences, ...ruleset.sequences] : ruleset.sequences;
}
