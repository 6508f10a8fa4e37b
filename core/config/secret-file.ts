import { readFileSync } from 'node:fs';

/** A secret file is re-read at most this often, so a rotated secret is picked up without a restart. */
const REREAD_MS = 60_000;

/**
 * The secret a file holds (trimmed), or undefined without a path. Read at once, so that a file
 * missing at start stops the process there; afterwards re-read now and then, keeping the secret
 * read last while the file is being replaced.
 */
export function secretFileReader(path: string | undefined): () => string | undefined {
  if (path === undefined) return () => undefined;
  const read = () => readFileSync(path, 'utf8').trim();
  let secret = read();
  let readAt = Date.now();
  return () => {
    if (Date.now() - readAt > REREAD_MS) {
      readAt = Date.now();
      try {
        secret = read();
      } catch {
        // A file being replaced may be missing for a moment: keep the secret read last.
      }
    }
    return secret;
  };
}
