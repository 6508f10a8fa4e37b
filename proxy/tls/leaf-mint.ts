import './reflect-metadata.ts';
import { isIP } from 'node:net';
import * as x509 from '@peculiar/x509';
import type { CaSigner } from './ca-signer.ts';
import { randomSerialNumber, subtleCrypto, type CryptoKey } from './webcrypto.ts';

const ONE_HOUR_MS = 3600 * 1000;
const ONE_YEAR_MS = 365 * 24 * ONE_HOUR_MS;

/** Mints a server certificate for `host` (a DNS name or an IP literal) around a shared public key. */
export async function mintLeafCertificate(
  ca: CaSigner,
  publicKey: CryptoKey,
  host: string,
  now = new Date(),
): Promise<x509.X509Certificate> {
  const san = isIP(host) === 0 ? { type: 'dns' as const, value: host } : { type: 'ip' as const, value: host };
  // A leaf must not outlive the CA that signs it, or clients reject the chain.
  const notAfter = new Date(Math.min(now.getTime() + ONE_YEAR_MS, ca.cert.notAfter.getTime()));
  return x509.X509CertificateGenerator.create(
    {
      serialNumber: randomSerialNumber(),
      subject: [{ CN: [host] }],
      issuer: ca.cert.subjectName,
      notBefore: new Date(now.getTime() - ONE_HOUR_MS),
      notAfter,
      publicKey,
      signingKey: ca.key,
      signingAlgorithm: ca.signingAlgorithm,
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
        new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth], false),
        new x509.SubjectAlternativeNameExtension([san], false),
        await x509.AuthorityKeyIdentifierExtension.create(ca.cert, false, subtleCrypto),
      ],
    },
    subtleCrypto,
  );
}
