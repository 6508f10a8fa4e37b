/**
 * One scrubber for everything that is logged or echoed: credentials are recognised by the field
 * that holds them (headers, config keys), by their shape (API keys of this product and of the
 * providers, JWTs, bearer tokens, credentials in URLs, secret query parameters), and by value
 * (the secrets of the process's own configuration).
 */

export const REDACTED = '[redacted]';

/** Field names whose value is a credential wherever they appear (headers and config keys). */
const SECRET_FIELDS = new Set([
  'authorization',
  'proxy-authorization',
  'x-api-key',
  'api-key',
  'x-goog-api-key',
  'cookie',
  'set-cookie',
  'x-svc-signature',
  'key_secret',
  'api_key',
  'apikey',
  'password',
  'pass',
  'token',
  'secret',
  'client_secret',
  'bootstrap_admin_key',
  'mcp_api_key',
  'nats_password',
  'nats_token',
  'database_url',
  'webhook_secret',
  'signing_secret',
]);

/** Query parameters that carry credentials (Gemini's `?key=`, signed URLs, OAuth codes). */
const SECRET_PARAMS =
  'key|api[-_]?key|apikey|token|access[-_]?token|refresh[-_]?token|id[-_]?token|secret|client[-_]?secret|password|passwd|pass|auth|sig|signature|x-amz-signature|x-goog-signature|x-amz-credential|x-amz-security-token|code|credential|session';

const PATTERNS: ReadonlyArray<[RegExp, string]> = [
  // user:password@ in any URL (NATS, webhooks, upstreams).
  // Quotes and backslashes end the match: in a finished JSON line they close the string.
  [/\b([a-z][a-z0-9+.-]*:\/\/)[^\s/?#@"'<>\\]+@/gi, `$1${REDACTED}@`],
  [new RegExp(`([?&;](?:${SECRET_PARAMS})=)[^&#\\s"'<>]*`, 'gi'), `$1${REDACTED}`],
  // This product's API keys: the id part is public and kept, the secret part is not.
  [/\b(svc_[0-9a-f]{16}_)[A-Za-z0-9_-]{43}/g, `$1${REDACTED}`],
  // Webhook signing secrets of tenants.
  [/\bwhsec_[A-Za-z0-9_-]{43}/g, REDACTED],
  // JWTs: base64url of `{"` opens header and payload.
  [/\beyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*/g, REDACTED],
  [/\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]+/gi, `$1 ${REDACTED}`],
  // Provider keys: OpenAI (sk-, sk-proj-), Anthropic (sk-ant-), Google (AIza…).
  [/\bsk-[A-Za-z0-9_-]{16,}/g, REDACTED],
  [/\bAIza[0-9A-Za-z_-]{30,}/g, REDACTED],
];

const MAX_DEPTH = 8;

export interface Scrubber {
  text(value: string): string;
  /** A copy of `value` with every credential replaced; Errors become plain objects. */
  value(value: unknown): unknown;
}

/**
 * @param known secret values to remove wherever they appear (the process's configured keys and
 *   passwords); values shorter than 8 characters are ignored, too likely to be ordinary text.
 */
export function createScrubber(known: Iterable<string | undefined> = []): Scrubber {
  const literals = [...new Set([...known].filter((s): s is string => s !== undefined && s.length >= 8))].sort(
    (a, b) => b.length - a.length,
  );
  const text = (input: string): string => {
    let out = input;
    for (const secret of literals) if (out.includes(secret)) out = out.split(secret).join(REDACTED);
    for (const [pattern, replacement] of PATTERNS) out = out.replace(pattern, replacement);
    return out;
  };
  const seen = new WeakSet<object>();
  const value = (input: unknown, depth = 0): unknown => {
    if (typeof input === 'string') return text(input);
    if (typeof input !== 'object' || input === null) return input;
    if (depth >= MAX_DEPTH || seen.has(input)) return '[omitted]';
    seen.add(input);
    try {
      if (input instanceof Error) return errorObject(input, (v) => value(v, depth + 1));
      if (Array.isArray(input)) return input.map((item) => value(item, depth + 1));
      if (input instanceof URL) return text(input.href);
      if (Buffer.isBuffer(input) || ArrayBuffer.isView(input)) return `[${input.byteLength} bytes]`;
      const out: Record<string, unknown> = {};
      for (const [key, item] of Object.entries(input)) {
        out[key] = SECRET_FIELDS.has(key.toLowerCase()) && item !== undefined ? REDACTED : value(item, depth + 1);
      }
      return out;
    } finally {
      seen.delete(input);
    }
  };
  return { text, value };
}

/** An Error as pino's serializer would show it, every part scrubbed (messages quote URLs and keys). */
function errorObject(error: Error, scrub: (v: unknown) => unknown): Record<string, unknown> {
  const out: Record<string, unknown> = { type: error.name, message: scrub(error.message), stack: scrub(error.stack) };
  for (const [key, item] of Object.entries(error)) if (!(key in out)) out[key] = scrub(item);
  if (error.cause !== undefined) out.cause = scrub(error.cause);
  return out;
}

/** The configured secrets of a process, by the same field names the scrubber redacts. */
export function configuredSecrets(config: object): string[] {
  return Object.entries(config).flatMap(([key, item]) =>
    SECRET_FIELDS.has(key) && typeof item === 'string' ? [item] : [],
  );
}

/** A URL as it may be logged: origin and path, no credentials, no query, no fragment. */
export function loggableUrl(raw: string | URL): string {
  const url = typeof raw === 'string' ? URL.parse(raw) : raw;
  if (url === null) return '[unparsable URL]';
  return `${url.protocol}//${url.host}${url.pathname}`;
}
