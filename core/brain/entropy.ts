import { finding, type Finding } from './finding.ts';
import type { TextView } from './text-view.ts';

const MIN_TOKEN = 24;
const MAX_TOKEN = 4096;

/** Shannon entropy of a string, bits per character. */
export function shannonEntropy(text: string): number {
  const counts = new Map<string, number>();
  for (const c of text) counts.set(c, (counts.get(c) ?? 0) + 1);
  let h = 0;
  for (const n of counts.values()) {
    const p = n / text.length;
    h -= p * Math.log2(p);
  }
  return h;
}

/**
 * The entropy a token must reach to count as random: 82% of the most its length allows, at
 * most 4.2 bits (a random base62 key of 24 characters has about 4.2). Calibrated (core/brain/entropy.test.ts) so that random keys of 24 to 64
 * characters pass and identifiers, paths, words, hex digests and UUIDs stay under it.
 */
export function entropyThreshold(length: number): number {
  return Math.min(4.2, 0.82 * Math.log2(length));
}

/** A token that looks machine-made and random: mixed letters and digits, not hex, not a UUID. */
export function isRandomToken(token: string): boolean {
  if (token.length < MIN_TOKEN || token.length > MAX_TOKEN) return false;
  if (/^[0-9a-f-]+$/i.test(token)) return false;
  if (!/[0-9]/.test(token) || !/[a-z]/.test(token) || !/[A-Z]/.test(token)) return false;
  if (/^(?:sha\d+|md5)[-:]/i.test(token)) return false;
  // Words run together (`ThisIsAVeryLongName2024`) have long lower-case runs; random keys rarely do.
  const wordy = (token.match(/[a-z]{3,}/g) ?? []).reduce((n, run) => n + run.length, 0);
  if (wordy / token.length > 0.45) return false;
  return shannonEntropy(token) >= entropyThreshold(token.length);
}

const CREDENTIAL_NAME =
  /(?:password|passwd|passphrase|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|private[_-]?key|credential|auth|bearer|client[_-]?secret|signing[_-]?key|session[_-]?key|x-api-key)["']?\s*(?:[:=]|:=|=>)?\s*["']?(?:bearer\s+|basic\s+|token\s+)?$/;
const NOT_CREDENTIAL =
  /page|cursor|next|continuation|etag|nonce|csrf|state|request[_-]?id|trace|hash|sha|checksum|digest|integrity|commit|idempotency|session[_-]?id|_id$/;
const PLACEHOLDER =
  /^(?:\$\{?[\w.]+\}?|<[^>]*>|\{\{.*\}\}|\*{3,}.*|x{4,}.*|.*(?:example|placeholder|your[_-]|redacted|changeme|dummy|sample|xxxx|\.\.\.).*)$/i;

/**
 * Credentials no pattern knows: a random token assigned to a credential-like name (`api_key=`,
 * `"password":`, `Authorization: Bearer`), or a password literal. A random token with no such
 * name is recorded below the default threshold: page cursors and ids look the same.
 */
export function scanEntropy(view: TextView, out: Finding[]): void {
  const text = view.folded;
  const keyIsCredential = CREDENTIAL_NAME.test(view.key) && !NOT_CREDENTIAL.test(view.key);
  let i = 0;
  let found = 0;
  while (i < text.length && found < 3) {
    if (!isTokenChar(text.charCodeAt(i))) {
      i++;
      continue;
    }
    let j = i;
    while (j < text.length && isTokenChar(text.charCodeAt(j))) j++;
    const token = text.slice(i, j);
    const before = view.norm.slice(Math.max(0, i - 40), i);
    const named = (keyIsCredential && i < 16) || (CREDENTIAL_NAME.test(before) && !NOT_CREDENTIAL.test(before));
    if (named && !PLACEHOLDER.test(token)) {
      if (isRandomToken(token)) {
        out.push(finding(view, 'DATA_EXFILTRATION', 0.8, 'secrets.assigned_credential', i, j, true));
        found++;
      } else if (token.length >= 8 && /pass|pwd/.test(before + view.key) && /\d/.test(token) && /[a-z]/i.test(token)) {
        out.push(finding(view, 'DATA_EXFILTRATION', 0.7, 'secrets.password_literal', i, j, true));
        found++;
      }
    } else if (token.length >= 40 && isRandomToken(token)) {
      out.push(finding(view, 'DATA_EXFILTRATION', 0.4, 'secrets.high_entropy', i, j, true));
      found++;
    }
    if (token.length >= 200 && /^[A-Za-z0-9+/]+=*$/.test(token))
      out.push(finding(view, 'SUSPICIOUS', 0.4, 'payload.opaque_blob', i, j));
    i = j;
  }
}

function isTokenChar(c: number): boolean {
  return (
    (c >= 0x30 && c <= 0x39) ||
    (c >= 0x41 && c <= 0x5a) ||
    (c >= 0x61 && c <= 0x7a) ||
    c === 0x2b ||
    c === 0x2f ||
    c === 0x3d ||
    c === 0x5f ||
    c === 0x2d ||
    c === 0x2e
  );
}
