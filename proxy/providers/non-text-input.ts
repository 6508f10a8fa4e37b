import { asArray, asObject, asString, isTextKey, TEXT_NESTS, type JsonObject } from './json-access.ts';

/**
 * What a prompt part the proxy does not tokenize holds back in input tokens at most. An image
 * costs its provider at most `image` tokens however large; a part whose content is elsewhere (a
 * file id, a URL, a Gemini `fileUri`) or whose tokens can outnumber its bytes (a compressed PDF,
 * video or audio) is of unknown size and counts `unknown` (proxy_server_context_tokens).
 */
export interface NonTextAmounts {
  image: number;
  unknown: number;
}

/**
 * The most tokens one image costs, per provider, above every figure of its documentation: OpenAI
 * caps an image at 1,536 patches (times 2.46 for its smallest models) or 8 tiles of 170, larger
 * for its original-detail mode; Anthropic resizes one to about 1.15 megapixels (some 1,600 tokens)
 * and its newest models to some 4,800; Gemini bills 258 tokens a 768-pixel tile or up to 2,240 by
 * media resolution.
 */
export const IMAGE_TOKENS = { openai: 20_000, anthropic: 10_000, gemini: 20_000 } as const;

/** Parts whose text the adapters count: their nested parts alone are measured here. */
const COUNTED: ReadonlySet<unknown> = new Set([
  'text',
  'input_text',
  'output_text',
  'reasoning_text',
  'message',
  'tool_use',
  'server_tool_use',
  'mcp_tool_use',
  'tool_result',
  'mcp_tool_result',
  'thinking',
  'function_call',
  'function_call_output',
  'custom_tool_call_output',
]);

/**
 * Parts of text the provider reads as text, which the adapters do not tokenize: their UTF-8 bytes
 * bound their tokens (uncompressed audio, which OpenAI takes only as WAV or MP3, too).
 */
const BYTE_BOUNDED: ReadonlySet<unknown> = new Set([
  'refusal',
  'redacted_thinking',
  'reasoning',
  'summary_text',
  'custom_tool_call',
  'search_result',
  'input_audio',
  'web_search_call',
  'file_search_call',
  'local_shell_call',
  'local_shell_call_output',
  'mcp_call',
  'mcp_list_tools',
  'mcp_approval_request',
  'mcp_approval_response',
  'code_interpreter_call',
  // A computer call's output: its ids and acknowledged checks, its screenshot measured as an image.
  'computer_call_output',
  // Results of Anthropic's web search and fetch replayed: titles, URLs, page text, errors. A
  // search result's page text comes encrypted: it is taken to hold no more tokens than its blob
  // has bytes (what the provider bills beyond is charged, docs/budgets.md "Overspend bound"). A
  // fetched document is measured as a document.
  'web_search_tool_result',
  'web_search_result',
  'web_search_tool_result_error',
  'web_fetch_tool_result',
  'web_fetch_result',
  'web_fetch_tool_result_error',
]);

/** Parts that are an image whatever their type says: a computer call's screenshot, by URL or file. */
const IMAGES: ReadonlySet<unknown> = new Set(['computer_screenshot']);

/** Gemini parts (which have no type) of a function call or result, whose JSON the adapter counts as text. */
export const GEMINI_FUNCTION_KEYS = ['functionCall', 'function_call', 'functionResponse', 'function_response'];

/** Gemini parts of code the model ran and its result. */
const GEMINI_CODE_KEYS = ['executableCode', 'executable_code', 'codeExecutionResult', 'code_execution_result'];

/**
 * Where a part nests parts of its own: tool results, messages, a document's blocks. The adapters
 * read the text of the parts listed in some of them (`TEXT_NESTS`), of a part with no text of its own.
 */
const NESTED_KEYS = ['content', 'output', 'parts'];

type Kind = 'counted' | 'bytes' | 'image' | 'unknown';

function mediaType(p: JsonObject): string {
  const holder = asObject(p.inlineData ?? p.inline_data ?? p.fileData ?? p.file_data ?? p.source) ?? p;
  return asString(holder.mimeType ?? holder.mime_type ?? holder.media_type) ?? '';
}

function kindOf(p: JsonObject): Kind {
  const type = p.type;
  if (type === undefined && (typeof p.text === 'string' || typeof p.role === 'string')) return 'counted';
  if (COUNTED.has(type) || GEMINI_FUNCTION_KEYS.some((key) => p[key] !== undefined)) return 'counted';
  if (BYTE_BOUNDED.has(type) || GEMINI_CODE_KEYS.some((key) => p[key] !== undefined)) return 'bytes';
  const media = mediaType(p);
  if ((typeof type === 'string' && type.includes('image')) || IMAGES.has(type) || media.startsWith('image/'))
    return 'image';
  // A document given as text (Anthropic's `source.type: "text"`) or as blocks, inline text data.
  const source = asObject(p.source)?.type;
  if (source === 'text' || source === 'content' || media.startsWith('text/')) return 'bytes';
  return 'unknown';
}

/**
 * The UTF-8 bytes of a value's text as the provider reads it: its strings, its objects' keys, and
 * its numbers and literals as written. A key or a list of numbers is read as much as a string is.
 */
function inlineBytes(value: unknown): number {
  if (typeof value === 'string') return Buffer.byteLength(value);
  if (typeof value === 'number' || typeof value === 'boolean' || value === null) return String(value).length;
  let bytes = 0;
  if (Array.isArray(value)) for (const item of value) bytes += inlineBytes(item);
  else {
    const object = asObject(value);
    if (object === undefined) return 0;
    for (const key in object) bytes += Buffer.byteLength(key) + inlineBytes(object[key]);
  }
  return bytes;
}

/**
 * A part's own bytes: all it holds but the parts it nests, measured apart (`single`: a part it
 * holds alone too), and the text the adapters read; its keys included.
 */
function ownBytes(p: JsonObject, read: boolean, single: boolean): number {
  let bytes = 0;
  for (const key in p) {
    const value = p[key];
    const nested = NESTED_KEYS.includes(key) && (Array.isArray(value) || (single && asObject(value) !== undefined));
    if (!read || !isTextKey(p, key)) bytes += Buffer.byteLength(key) + (nested ? 0 : inlineBytes(value));
  }
  return bytes;
}

/**
 * The parts a part nests, in a list or alone (`single`: a computer call's screenshot, a search's
 * error). `read`: the adapters read the text of the parts it lists where `textOf` does, and a
 * document's blocks are counted in its own bytes; a part held alone, and the parts of a Gemini
 * function result, are read as no text.
 */
function nestedTokens(p: JsonObject, amounts: NonTextAmounts, read: boolean, single: boolean): number {
  let tokens = 0;
  for (const key of NESTED_KEYS) {
    const alone = single ? asObject(p[key]) : undefined;
    if (alone !== undefined) tokens += partTokens(alone, amounts, false);
    else tokens += partsTokens(p[key], amounts, read && TEXT_NESTS.includes(key));
  }
  tokens += partsTokens(asObject(p.source)?.content, amounts, true);
  tokens += partsTokens(asObject(p.functionResponse)?.parts, amounts, false);
  tokens += partsTokens(asObject(p.function_response)?.parts, amounts, false);
  return tokens;
}

/**
 * One part: what it nests, and itself unless it is text the adapters count. `read` says they read
 * its text (`isTextKey`): a part of text they do not read (listed where `textOf` does not look)
 * counts at its bytes, as any string of a part that is not text they do not read does. A part of
 * a type the proxy does not know counts whole, at least at the allowance, what it holds alone
 * with it; each part it lists counts on its own.
 */
function partTokens(p: JsonObject, amounts: NonTextAmounts, read: boolean): number {
  const kind = kindOf(p);
  const single = kind !== 'unknown';
  const nested = nestedTokens(p, amounts, read, single);
  if (kind === 'counted' && read) return nested;
  // An image is billed by its pixels, which the provider scales down to a bound, never by the
  // bytes that encode it: a screenshot of a megabyte costs what its bound says.
  if (kind === 'image') return nested + amounts.image;
  const bytes = ownBytes(p, read, single);
  return nested + (kind === 'unknown' ? Math.max(bytes, amounts.unknown) : bytes);
}

function partsTokens(content: unknown, amounts: NonTextAmounts, read: boolean): number {
  let tokens = 0;
  for (const part of asArray(content)) {
    const p = asObject(part);
    if (p !== undefined) tokens += partTokens(p, amounts, read);
  }
  return tokens;
}

/**
 * The input tokens at most of a content's parts that are not text, which the tokenizer does not
 * count: each part that is not text, of any type (one the proxy does not know counts as of
 * unknown size), at least its inline bytes (a document's text, base64 data), an image at
 * `amounts.image` however it is given (a URL, a data URL), a part of unknown size at least
 * `amounts.unknown`; and so for the parts nested in tool results and messages, whose text counts
 * at its bytes where the adapters do not read it. Bytes only: no tokenizer, so the bound and the
 * exact count of a prompt hold the same figure.
 */
export function nonTextTokens(content: unknown, amounts: NonTextAmounts): number {
  return partsTokens(content, amounts, true);
}
