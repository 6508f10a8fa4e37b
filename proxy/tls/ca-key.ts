import { createPrivateKey, X509Certificate } from 'node:crypto';
import { SvcError } from '../../core/errors/index.ts';
import { ECDSA_SHA256, subtleCrypto, type CryptoKey, type SigningAlgorithm } from './webcrypto.ts';

/** The CA's private key, ready to sign, and the signature algorithm it signs with. */
export interface CaKey {
  key: CryptoKey;
  signingAlgorithm: SigningAlgorithm;
}

const RSA_SHA256 = { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' } as const;

/**
 * Checks the CA's PEM and imports its key, with node:crypto alone so that start-up refuses a bad
 * CA without loading the certificate library. Accepts PKCS#8, SEC1 and PKCS#1 keys, ECDSA P-256
 * or RSA, since a CA mounted from a Secret may have been made with openssl rather than by this proxy.
 */
export async function importCaKey(certPem: string, keyPem: string): Promise<CaKey> {
  let keyObject: ReturnType<typeof createPrivateKey>;
  try {
    new X509Certificate(certPem);
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
    return { key, signingAlgorithm: ECDSA_SHA256 };
  }
  if (type === 'rsa') {
    const key = await subtleCrypto.subtle.importKey('pkcs8', pkcs8, RSA_SHA256, false, ['sign']);
    return { key, signingAlgorithm: RSA_SHA256 };
  }
  throw new SvcError('SVC-SYS-9001', `proxy CA key type not supported: ${type ?? 'unknown'} (use ECDSA P-256 or RSA)`);
}
