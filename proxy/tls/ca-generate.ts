import './reflect-metadata.ts';
import * as x509 from '@peculiar/x509';
import { P256, ECDSA_SHA256, randomSerialNumber, subtleCrypto, toPem } from './webcrypto.ts';

export interface CaPem {
  certPem: string;
  keyPem: string;
}

const TEN_YEARS_MS = 10 * 365 * 24 * 3600 * 1000;
const ONE_HOUR_MS = 3600 * 1000;

/** Generates a self-signed ECDSA P-256 certificate authority valid for ten years. */
export async function generateCa(commonName = 'Agent Governance Proxy CA', now = new Date()): Promise<CaPem> {
  const keys = await subtleCrypto.subtle.generateKey(P256, true, ['sign', 'verify']);
  const cert = await x509.X509CertificateGenerator.createSelfSigned(
    {
      serialNumber: randomSerialNumber(),
      name: `CN=${commonName}`,
      // Backdated so that a client whose clock lags slightly still accepts it.
      notBefore: new Date(now.getTime() - ONE_HOUR_MS),
      notAfter: new Date(now.getTime() + TEN_YEARS_MS),
      keys,
      signingAlgorithm: ECDSA_SHA256,
      extensions: [
        new x509.BasicConstraintsExtension(true, 0, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
        await x509.SubjectKeyIdentifierExtension.create(keys.publicKey, false, subtleCrypto),
      ],
    },
    subtleCrypto,
  );
  const pkcs8 = await subtleCrypto.subtle.exportKey('pkcs8', keys.privateKey);
  return { certPem: cert.toString('pem') + '\n', keyPem: toPem(pkcs8, 'PRIVATE KEY') };
}
