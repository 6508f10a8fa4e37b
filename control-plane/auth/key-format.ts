import { randomBytes } from 'node:crypto';

export { hashKey, sameHash } from '../../core/auth/bearer-secret.ts';

/**
 * API keys look like `svc_<id>_<secret>`: the id is public (it locates the record without a
 * scan), the secret is 32 random bytes. Only SHA-256 of the whole key is stored; keys are
 * high-entropy, so a fast hash is enough and keeps authentication off the slow path.
 */
const KEY_PATTERN = /^svc_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$/;

export function generateApiKey(): { id: string; secret: string } {
  const id = randomBytes(8).toString('hex');
  return { id, secret: `svc_${id}_${randomBytes(32).toString('base64url')}` };
}

export function parseKeyId(secret: string): string | null {
  return KEY_PATTERN.exec(secret)?.[1] ?? null;
}

/** What a key looks like once it has been shown: its id and last four characters. */
export function keyHint(secret: string): string {
  return `${secret.slice(0, 8)}…${secret.slice(-4)}`;
}
