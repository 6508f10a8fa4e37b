import { SvcError } from '../../core/errors/index.ts';
import { bodyRefused, MAX_BODY_DEPTH } from './read-body.ts';
import { foldKey, parseStrictJson } from './strict-json.ts';

/**
 * Top-level keys (case folded) by which the providers' APIs declare tools: OpenAI's `tools` and
 * legacy `functions`, Anthropic's `tools` and `mcp_servers`, Gemini's `tools`, `toolConfig` and
 * `functionDeclarations`.
 */
const TOOL_KEYS = new Set([
  'tools',
  'functions',
  'mcp_servers',
  'tool_config',
  'toolconfig',
  'function_declarations',
  'functiondeclarations',
]);

function declaresSomething(value: unknown): boolean {
  if (value === null) return false;
  if (Array.isArray(value)) return value.length > 0;
  return typeof value !== 'object' || Object.keys(value).length > 0;
}

/**
 * What the proxy reads of an unclassified call's body: the `model` it names, '' when it names
 * none or is not JSON (a file upload, an image). JSON is read as strictly as a routed call's: a
 * key given twice (up to case, as Go's decoder folds it) would let the proxy judge one model while
 * the provider serves another. A body that declares tools is refused: without the route's reader
 * the proxy cannot judge them, and a provider runs its own (search, code, a remote MCP server)
 * before any answer could show the call.
 */
export function readUnclassifiedBody(bytes: Buffer): { model: string } {
  const parsed = parseStrictJson(bytes.toString('utf8'), { maxDepth: MAX_BODY_DEPTH });
  if (!parsed.ok) {
    if (parsed.fault === 'syntax') return { model: '' };
    throw bodyRefused(parsed.reason);
  }
  if (typeof parsed.value !== 'object' || parsed.value === null || Array.isArray(parsed.value)) return { model: '' };
  let model = '';
  for (const [key, value] of Object.entries(parsed.value)) {
    const folded = foldKey(key);
    if (TOOL_KEYS.has(folded) && declaresSomething(value))
      throw new SvcError(
        'SVC-ADP-5003',
        `the body declares tools (${key}) on a path the proxy does not route, where it cannot judge them; such requests are refused`,
        { fields: key },
        [{ field: key, description: 'tools are declared only on the routes the proxy governs' }],
      );
    if (folded === 'model' && typeof value === 'string') model = value;
  }
  return { model };
}
