import { asObject } from './json-access.ts';
import { mcpToolFilter } from './mcp-allowed-tools.ts';

/**
 * Whether OpenAI asks for approval before every call of a remote MCP server's tools, so that
 * each call comes back in the answer to be judged: `require_approval: "always"`, or its object
 * form whose `always` filter matches every tool the server may call (`allowed_tools`) and with
 * no `never`. A filter is a conjunction of criteria, so `always` matches every such tool when
 * each of its criteria is one `allowed_tools` sets alike: none (`{}`), or the same `read_only`.
 * A list of names cannot cover tools the declaration does not name. Anything else, or not read
 * here, counts as not covering every tool.
 */
export function approvesEveryCall(requireApproval: unknown, allowedTools: unknown): boolean {
  if (requireApproval === 'always') return true;
  const form = asObject(requireApproval);
  if (form === undefined || Object.keys(form).some((key) => key !== 'always')) return false;
  const always = mcpToolFilter(form.always);
  if (always === undefined || always.tool_names !== undefined) return false;
  if (always.read_only === undefined) return true;
  const allowed = mcpToolFilter(allowedTools);
  // A filter read whole only: `tool_names` here is no list, or the server would be listed.
  return (
    typeof always.read_only === 'boolean' &&
    allowed !== undefined &&
    allowed.tool_names === undefined &&
    always.read_only === allowed.read_only
  );
}
