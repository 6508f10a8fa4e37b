import type { CompiledRuleset } from './engine.ts';

const TOOL = 'tool:';
/** A remote MCP server as a request declares it, judged on its own: no tool of it is named so. */
const SERVER = 'tool:mcp';

const known = new WeakMap<CompiledRuleset, boolean>();

/** The context field of a model call that names the tools its request declares. */
const DECLARED_TOOLS = 'declared_tools';

/**
 * Whether some rule of the ruleset can refuse or hold a tool for its name: a DENY or
 * REQUIRE_APPROVAL rule of a blocking policy whose action pattern matches `tool:<name>` for some
 * name (`tool:delete_repo`, `tool:fs_*`, `*:delete`, `*`), its conditions aside, since any of them
 * may hold, or one whose condition, a SEMANTIC one too, reads the names of the tools a model call
 * declares. A remote MCP server the provider calls may then call that tool unseen, unless the
 * request restricts it to tools named. Worked out once per ruleset.
 */
export function judgesToolNames(ruleset: CompiledRuleset): boolean {
  let judges = known.get(ruleset);
  if (judges === undefined) {
    judges = ruleset.steps.some(
      ({ policy, rule }) =>
        (policy.enforcement === 'BLOCK' || policy.enforcement === 'TERMINATE') &&
        (rule.decision === 'DENY' || rule.decision === 'REQUIRE_APPROVAL') &&
        (matchesSomeTool(rule.action) || [...rule.checks, ...rule.semantic].some(({ field }) => readsDeclared(field))),
    );
    known.set(ruleset, judges);
  }
  return judges;
}

/** Whether a condition's field path reads the declared tools' names: the list, or a name in it. */
function readsDeclared(field: string): boolean {
  return field === DECLARED_TOOLS || field.startsWith(`${DECLARED_TOOLS}.`);
}

/**
 * Whether a case-folded action pattern matches some `tool:<name>` other than the server's own
 * action: without `*`, when it is such an action; with one, when the text before the first `*`
 * begins with `tool:` or is a start of it, the `*` then standing for the rest of some name.
 */
function matchesSomeTool(pattern: string): boolean {
  const star = pattern.indexOf('*');
  if (star < 0) return pattern.startsWith(TOOL) && pattern !== SERVER;
  const head = pattern.slice(0, star);
  return head.startsWith(TOOL) || TOOL.startsWith(head);
}
