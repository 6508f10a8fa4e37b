import { asObject, type JsonObject } from './json-access.ts';

/** The keys of OpenAI's object form of `allowed_tools`; `read_only` only narrows `tool_names`. */
const FILTER_KEYS: ReadonlySet<string> = new Set(['tool_names', 'read_only']);

/** OpenAI's filter of a server's tools (`{ tool_names, read_only }`), or undefined when `value` is none. */
export function mcpToolFilter(value: unknown): JsonObject | undefined {
  const filter = asObject(value);
  return filter !== undefined && Object.keys(filter).every((key) => FILTER_KEYS.has(key)) ? filter : undefined;
}

/**
 * The tools a remote MCP server handed to the provider may call, by name, as a declaration
 * restricts them: OpenAI's `allowed_tools` (a list, or `{ tool_names }`), Anthropic's
 * `tool_configuration.allowed_tools`. Each is judged as `tool:<name>` before the call goes
 * upstream, since the provider calls them before the answer shows it. Undefined when there is no
 * such list or it is not one read here (a name that is not a string, an object of other keys):
 * the server may then call every tool it has (docs/proxy.md says when that is refused).
 */
export function mcpAllowedTools(allowed: unknown): string[] | undefined {
  const filter = mcpToolFilter(allowed);
  const names = filter !== undefined ? filter.tool_names : allowed;
  if (!Array.isArray(names)) return undefined;
  return names.every((name): name is string => typeof name === 'string' && name !== '') ? names : undefined;
}
