import { renameSync, rmSync, writeFileSync } from 'node:fs';
import { rootCertificates } from 'node:tls';

/**
 * Writes the public roots Node ships plus the proxy CA into one PEM file. `SSL_CERT_FILE` and
 * `REQUESTS_CA_BUNDLE` replace a client's whole trust store, so pointing them at the proxy CA alone
 * would break every host the proxy tunnels without interception; this bundle keeps both working.
 *
 * The file is written beside its path and renamed over it: a link planted at the path (the
 * volume is shared with the pod's other containers) is replaced, never written through, and an
 * agent reading the bundle never sees half of it.
 */
export function writeTrustBundle(path: string, caCertPem: string): string {
  const staged = `${path}.${process.pid}.tmp`;
  rmSync(staged, { force: true });
  // `wx` creates the file or fails, a link of that name included.
  writeFileSync(staged, [...rootCertificates, caCertPem.trim()].join('\n') + '\n', { mode: 0o644, flag: 'wx' });
  renameSync(staged, path);
  return path;
}
