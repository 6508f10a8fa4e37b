/**
 * Context fields that name something with one identity in any case: a tool (an MCP server or a
 * tool runtime may match its name without regard to case), a model (providers take `GPT-4o` for
 * `gpt-4o`), a host, a server, a provider. Conditions on them compare without regard to case, as
 * actions do.
 */
export const IDENTITY_FIELDS: ReadonlySet<string> = new Set([
  'tool_name',
  'tool',
  'model',
  'model_id',
  'model_name',
  'host',
  'mcp_server',
  'provider',
  'declared_tools',
  'adapter_type',
]);

const NOT_ASCII = /\P{ASCII}/u;

/**
 * Case folding as parsers that ignore case apply it (Go's `strings.EqualFold` folds `ſ` with `s`
 * and `K` with `k`): upper then lower case, so every spelling one of them takes for the same
 * name folds to one text.
 */
export function foldCase(text: string): string {
  const lower = text.toLowerCase();
  // ASCII folds by lower case alone: most names are, and pay one conversion.
  return NOT_ASCII.test(lower) ? lower.toUpperCase().toLowerCase() : lower;
}

/** The pattern made case-insensitive, its leading flags group kept as one (the prefilter reads only that). */
export function caseInsensitivePattern(pattern: string): string {
  const flags = /^\(\?([imsU]+)\)/.exec(pattern);
  if (flags === null) return `(?i)${pattern}`;
  const given = flags[1] as string;
  return given.includes('i') ? pattern : `(?${given}i)${pattern.slice(flags[0].length)}`;
}
