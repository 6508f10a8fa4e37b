import './reflect-metadata.ts';
import { createPrivateKey } from 'node:crypto';
import * as x509 from '@peculiar/x509';
import { SvcError } from '../../core/errors/index.ts';
import { ECDSA_SHA256, subtleCrypto, type CryptoKey, type SigningAlgorithm } from './webcrypto.ts';

/** The CA as needed to sign leaves: its certificate, private key and signature algorithm. */
export interface CaSigner {
  cert: x509.X509Certificate;
  key: CryptoKey;
  signingAlgorithm: SigningAlgorithm;
}

const RSA_SHA256 = { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' } as const;

/**
 * Imports a CA from PEM. Accepts PKCS#8, SEC1 and PKCS#1 keys, ECDSA P-256 or RSA, since a CA
 * mounted from a Secret may have been made with openssl rather than by this proxy.
 */
export async function importCaSigner(certPem: string, keyPem: string): Promise<CaSigner> {
  let cert: x509.X509Certificate;
  let keyObject: ReturnType<typeof createPrivateKey>;
  try {
    cert = new x509.X509Certificate(certPem);
    keyObject = createPrivateKey(keyPem);
  } catch (error) {
    throw new SvcError('SVC-SYS-9001', `proxy CA is not valid PEM: ${(error as Error).message}`);
  }
  const pkcs8 = keyObject.export({ type: 'pkcs8', format: 'der' });
  const type = keyObject.asymmetricKeyType;
  if (type === 'ec' && keyObject.asymmetricKeyDetails?.namedCurve === 'prime256v1') {
    const key = await subtleCrypto.subtle.importKey('pkcs8', pkcs8, { name: 'ECDSA', namedCurve: 'P-256' }, false, [
      'sign',
    ]);
    return { cert, key, signingAlgorithm: ECDSA_SHA256 };
  }
  if (type === 'rsa') {
    const key = await subtleCrypto.subtle.importKey('pkcs8', pkcs8, RSA_SHA256, false, ['sign']);
    return { cert, key, signingAlgorithm: RSA_SHA256 };
  }
  throw new SvcError('SVC-SYS-9001', `proxy CA key type not supported: ${type ?? 'unknown'} (use ECDSA P-256 or RSA)`);
}
