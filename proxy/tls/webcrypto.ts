import { webcrypto } from 'node:crypto';

export type CryptoKey = webcrypto.CryptoKey;
export type SigningAlgorithm = webcrypto.Algorithm | webcrypto.EcdsaParams;

/**
 * Node's WebCrypto, handed to every @peculiar/x509 call explicitly so that the library's
 * process-wide provider registry is never touched.
 */
export const subtleCrypto = webcrypto;

export const P256 = { name: 'ECDSA', namedCurve: 'P-256' } as const;
export const ECDSA_SHA256 = { name: 'ECDSA', hash: 'SHA-256' } as const;

/** A positive random serial number (RFC 5280: at most 20 octets, high bit clear). */
export function randomSerialNumber(): string {
  const bytes = webcrypto.getRandomValues(new Uint8Array(16));
  bytes[0] = (bytes[0] ?? 0) & 0x7f;
  return Buffer.from(bytes).toString('hex');
}

export function toPem(der: ArrayBuffer, label: 'PRIVATE KEY' | 'CERTIFICATE'): string {
  const base64 = Buffer.from(der)
    .toString('base64')
    .replace(/.{1,64}/g, '$&\n');
  return `-----BEGIN ${label}-----\n${base64}-----END ${label}-----\n`;
}
