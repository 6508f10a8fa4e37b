import { asObject, asString, type JsonObject } from './json-access.ts';
import { mcpAllowedTools } from './mcp-allowed-tools.ts';

/** The tools a remote MCP server may call by name, or the field by which it may call any. */
export type ServerTools = { tools: string[] } | { unlisted: string };

/**
 * The tools an `mcp_toolset` tool lets its server call, by name: those of its pinned listing
 * (`tools`), else those `configs` turns on when `default_config` turns every tool off, each
 * kept as `configs` or the default leaves it on. Undefined when every tool is on by default
 * with no listing, or a part is not read here.
 */
function toolsetTools(toolset: JsonObject): string[] | undefined {
  const configs = toolset.configs == null ? {} : asObject(toolset.configs);
  if (configs === undefined) return undefined;
  const onByDefault = asObject(toolset.default_config)?.enabled !== false;
  const enabled = (name: string) => (asObject(configs[name])?.enabled ?? onByDefault) !== false;
  let names: string[] | undefined;
  if (toolset.tools != null) {
    if (!Array.isArray(toolset.tools)) return undefined;
    names = mcpAllowedTools(toolset.tools.map((tool) => asString(asObject(tool)?.name)));
  } else if (!onByDefault) names = Object.keys(configs);
  return names?.filter(enabled);
}

/**
 * The tools the remote MCP server of `mcp_servers[index]` may call: as its `tool_configuration`
 * lists them (none when `enabled` is false), and as each `mcp_toolset` naming it lets it. A
 * server with neither, or with one that lets it call any tool, is named by the field that would
 * restrict it.
 */
export function anthropicServerTools(server: JsonObject, index: number, tools: readonly JsonObject[]): ServerTools {
  const allowed: string[] = [];
  let restricted = false;
  if (server.tool_configuration !== undefined) {
    const configuration = asObject(server.tool_configuration);
    const listed = mcpAllowedTools(configuration?.allowed_tools);
    if (listed === undefined && configuration?.enabled !== false)
      return { unlisted: `mcp_servers[${index}].tool_configuration.allowed_tools` };
    allowed.push(...(listed ?? []));
    restricted = true;
  }
  for (const [i, tool] of tools.entries()) {
    if (tool.type !== 'mcp_toolset' || tool.mcp_server_name !== server.name) continue;
    const listed = toolsetTools(tool);
    if (listed === undefined) return { unlisted: `tools[${i}].default_config.enabled` };
    allowed.push(...listed);
    restricted = true;
  }
  return restricted
    ? { tools: [...new Set(allowed)] }
    : { unlisted: `mcp_servers[${index}].tool_configuration.allowed_tools` };
}
