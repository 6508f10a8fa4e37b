import { asArray, asObject, asString } from './json-access.ts';

/**
 * The tools a remote MCP server handed to the provider may call, by name, as a declaration
 * restricts them: OpenAI's `allowed_tools` (a list, or `{ tool_names }`), Anthropic's
 * `tool_configuration.allowed_tools`. Each is judged as `tool:<name>` before the call goes
 * upstream, since the provider calls them before the answer shows it; a server declared without
 * such a list offers every tool it has, which only `tool:mcp` rules can judge.
 */
export function mcpAllowedTools(allowed: unknown): string[] {
  const names = Array.isArray(allowed) ? allowed : asArray(asObject(allowed)?.tool_names);
  return names.map(asString).filter((name): name is string => name !== undefined && name !== '');
}
