import { writeFileSync } from 'node:fs';
import { rootCertificates } from 'node:tls';

/**
 * Writes the public roots Node ships plus the proxy CA into one PEM file. `SSL_CERT_FILE` and
 * `REQUESTS_CA_BUNDLE` replace a client's whole trust store, so pointing them at the proxy CA alone
 * would break every host the proxy tunnels without interception; this bundle keeps both working.
 */
export function writeTrustBundle(path: string, caCertPem: string): string {
  writeFileSync(path, [...rootCertificates, caCertPem.trim()].join('\n') + '\n', { mode: 0o644 });
  return path;
}
