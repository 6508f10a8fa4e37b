import type { ActionMatcher } from './action-pattern.ts';

/**
 * Which rules of a ruleset can match an action, so an evaluation walks only those and not every
 * rule: with a thousand rules spread over `tool:*`, `llm:*` and `execution:*` patterns, a call
 * touches the few that name its action type. Built once per ruleset version.
 *
 * A pattern's literal head (the text before its first `*`) decides where it goes:
 * - no `*` at all (`tool:shell`): only that exact action can match;
 * - a head with a `:` (`tool:fs:*`, `llm:gpt-4*`): only actions of that type (`tool`, `llm`);
 * - any other (`*`, `*:delete`, `tool*`): every action is a candidate.
 * Every list keeps evaluation order, so the walk decides exactly as a full scan would. The rules
 * that do match an action are worked out on its first call and remembered, so a walk visits
 * only rules whose pattern matches, without testing a pattern.
 */
export interface ActionIndex {
  /** Indexes of the rules that can match `action`, ascending. */
  candidates(action: string): Int32Array;
  /** Indexes of the rules whose pattern matches `action`, ascending. */
  matching(action: string): Int32Array;
  /**
   * Indexes of the rules that can match some action of `action`'s type (`tool`, `llm`): the
   * same list, one per type, for every action of it. An `llm:` call is also judged under its
   * model's family name, another action of its type.
   */
  ofType(action: string): Int32Array;
}

/** A rule's action pattern as written, and compiled. */
export interface ActionRule {
  readonly action: string;
  readonly matchesAction: ActionMatcher;
}

/**
 * How many actions' matching rules an index remembers, how many rule indexes in all (1 MiB),
 * and the longest action it remembers: agents call a small vocabulary of actions, and made-up
 * ones cannot grow the memory. Past a limit it starts afresh.
 */
const REMEMBERED_ACTIONS = 512;
const REMEMBERED_INDEXES = 262_144;
const REMEMBERED_ACTION_LENGTH = 256;

export function indexActions(rules: readonly ActionRule[]): ActionIndex {
  const patterns = rules.map((r) => r.action);
  const any: number[] = [];
  const byType = new Map<string, number[]>();
  const byAction = new Map<string, number[]>();
  patterns.forEach((pattern, index) => {
    const star = pattern.indexOf('*');
    if (star < 0) push(byAction, pattern, index);
    else if (pattern.lastIndexOf(':', star) >= 0) push(byType, actionType(pattern), index);
    else any.push(index);
  });
  const anyList = Int32Array.from(any);
  const typed = new Map<string, Int32Array>();
  for (const [type, indexes] of byType) typed.set(type, merge(indexes, any));
  const exact = new Map<string, Int32Array>();
  for (const [action, indexes] of byAction)
    exact.set(action, merge(indexes, byType.get(actionType(action)) ?? [], any));
  const candidates = (action: string): Int32Array => exact.get(action) ?? typed.get(actionType(action)) ?? anyList;
  const ofType = new Map<string, Int32Array>();
  for (const type of new Set([...byType.keys(), ...[...byAction.keys()].map(actionType)])) {
    const exactOfType = [...byAction].filter(([action]) => actionType(action) === type).flatMap(([, list]) => list);
    ofType.set(type, merge(byType.get(type) ?? [], exactOfType, any));
  }
  const remembered = new Map<string, Int32Array>();
  let rememberedIndexes = 0;
  return {
    candidates,
    ofType: (action) => ofType.get(actionType(action)) ?? anyList,
    matching: (action) => {
      const known = remembered.get(action);
      if (known !== undefined) return known;
      const matching = candidates(action).filter((i) => (rules[i] as ActionRule).matchesAction(action));
      if (action.length <= REMEMBERED_ACTION_LENGTH && matching.length <= REMEMBERED_INDEXES) {
        if (remembered.size >= REMEMBERED_ACTIONS || rememberedIndexes + matching.length > REMEMBERED_INDEXES) {
          remembered.clear();
          rememberedIndexes = 0;
        }
        remembered.set(action, matching);
        rememberedIndexes += matching.length;
      }
      return matching;
    },
  };
}

/** `tool` for `tool:fs:write`; the whole action when it has no `:`. */
function actionType(action: string): string {
  const colon = action.indexOf(':');
  return colon < 0 ? action : action.slice(0, colon);
}

function push(map: Map<string, number[]>, key: string, index: number): void {
  const list = map.get(key);
  if (list === undefined) map.set(key, [index]);
  else list.push(index);
}

function merge(...lists: readonly (readonly number[])[]): Int32Array {
  return Int32Array.from(lists.flat()).sort();
}
