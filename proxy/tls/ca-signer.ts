import './reflect-metadata.ts';
import * as x509 from '@peculiar/x509';
import { SvcError } from '../../core/errors/index.ts';
import type { CaKey } from './ca-key.ts';

/** The CA as needed to sign leaves: its certificate, private key and signature algorithm. */
export interface CaSigner extends CaKey {
  cert: x509.X509Certificate;
}

/** The signer for a CA whose PEM `importCaKey` has checked and whose key it has imported. */
export function caSigner(certPem: string, caKey: CaKey): CaSigner {
  try {
    return { cert: new x509.X509Certificate(certPem), ...caKey };
  } catch (error) {
    throw new SvcError('SVC-SYS-9001', `proxy CA is not valid PEM: ${(error as Error).message}`);
  }
}
