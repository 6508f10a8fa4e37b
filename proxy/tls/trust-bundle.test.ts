import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { rootCertificates } from 'node:tls';
import { X509Certificate } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { generateCa } from './ca-generate.ts';
import { writeTrustBundle } from './trust-bundle.ts';

describe('writeTrustBundle', () => {
  it('holds the public roots and the proxy CA, each a parsable certificate', async () => {
    const ca = await generateCa();
    const path = writeTrustBundle(join(mkdtempSync(join(tmpdir(), 'bundle-')), 'bundle.pem'), ca.certPem);
    const blocks =
      readFileSync(path, 'utf8').match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
    expect(blocks).toHaveLength(rootCertificates.length + 1);
    expect(new X509Certificate(blocks.at(-1)!).fingerprint256).toBe(new X509Certificate(ca.certPem).fingerprint256);
    expect(blocks.every((b) => new X509Certificate(b).ca)).toBe(true);
  });
});
