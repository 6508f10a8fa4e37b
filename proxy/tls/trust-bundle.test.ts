import { lstatSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
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

  it('replaces a link planted at its path instead of writing through it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'bundle-'));
    const store = join(dir, 'data.mdb');
    writeFileSync(store, 'the sidecar store');
    const path = join(dir, 'bundle.pem');
    symlinkSync(store, path);
    // A link at the staging name as well.
    symlinkSync(store, `${path}.${process.pid}.tmp`);
    writeTrustBundle(path, (await generateCa()).certPem);
    expect(readFileSync(store, 'utf8')).toBe('the sidecar store');
    expect(lstatSync(path).isFile()).toBe(true);
    expect(readFileSync(path, 'utf8')).toContain('-----BEGIN CERTIFICATE-----');
  });
});
