import { createSecureContext, type SecureContext } from 'node:tls';
import { SvcError } from '../../core/errors/index.ts';
import { BoundedLru } from '../../core/resilience/bounded-lru.ts';
import { importCaKey, type CaKey } from './ca-key.ts';
import type { CaSigner } from './ca-signer.ts';
import type { mintLeafCertificate } from './leaf-mint.ts';
import { P256, subtleCrypto, toPem, type CryptoKey } from './webcrypto.ts';

export interface LeafCacheOptions {
  caCertPem: string;
  caKeyPem: string;
  /** Most hosts kept at once; the least recently used leaf is dropped beyond it. */
  maxEntries?: number;
}

export interface LeafCacheStats {
  size: number;
  minted: number;
}

interface Minter {
  ca: CaSigner;
  mint: typeof mintLeafCertificate;
}

/**
 * TLS server contexts for intercepted hosts, one leaf per host signed by the proxy CA.
 * All leaves share one ECDSA P-256 key made at start, so a new host costs a signature only.
 * The CA is checked at start with node:crypto; the certificate library that builds leaves
 * (about 15 MB resident) is loaded by the first interception, which pays for it once.
 */
export class LeafCertificateCache {
  readonly #caKey: CaKey;
  #minter: Promise<Minter> | undefined;
  readonly #leafPublicKey: CryptoKey;
  readonly #leafKeyPem: string;
  readonly #caCertPem: string;
  readonly #contexts: BoundedLru<string, Promise<SecureContext>>;
  #minted = 0;

  private constructor(
    caKey: CaKey,
    caCertPem: string,
    leafPublicKey: CryptoKey,
    leafKeyPem: string,
    maxEntries: number,
  ) {
    this.#caKey = caKey;
    this.#caCertPem = caCertPem;
    this.#leafPublicKey = leafPublicKey;
    this.#leafKeyPem = leafKeyPem;
    this.#contexts = new BoundedLru(maxEntries);
  }

  static async create(options: LeafCacheOptions): Promise<LeafCertificateCache> {
    const caKey = await importCaKey(options.caCertPem, options.caKeyPem);
    const keys = await subtleCrypto.subtle.generateKey(P256, true, ['sign', 'verify']);
    const leafKeyPem = toPem(await subtleCrypto.subtle.exportKey('pkcs8', keys.privateKey), 'PRIVATE KEY');
    return new LeafCertificateCache(caKey, options.caCertPem, keys.publicKey, leafKeyPem, options.maxEntries ?? 1000);
  }

  /** The CA certificate agents must trust, in PEM. */
  get caCertPem(): string {
    return this.#caCertPem;
  }

  get stats(): LeafCacheStats {
    return { size: this.#contexts.size, minted: this.#minted };
  }

  /** The server context for `host`; concurrent callers for one host share a single minting. */
  secureContextFor(host: string): Promise<SecureContext> {
    const key = host.toLowerCase();
    const cached = this.#contexts.get(key);
    if (cached !== undefined) return cached;
    const minting = this.#mint(key);
    this.#contexts.set(key, minting);
    // A failed minting is not cached, so the next connection retries.
    minting.catch(() => this.#contexts.delete(key));
    return minting;
  }

  async #mint(host: string): Promise<SecureContext> {
    try {
      const { ca, mint } = await this.#loadMinter();
      const cert = await mint(ca, this.#leafPublicKey, host);
      this.#minted += 1;
      return createSecureContext({ key: this.#leafKeyPem, cert: cert.toString('pem') });
    } catch (error) {
      throw new SvcError('SVC-SYS-9007', `cannot mint a TLS certificate for ${host}: ${(error as Error).message}`, {
        host,
      });
    }
  }

  #loadMinter(): Promise<Minter> {
    this.#minter ??= Promise.all([import('./ca-signer.ts'), import('./leaf-mint.ts')]).then(([signer, leaf]) => ({
      ca: signer.caSigner(this.#caCertPem, this.#caKey),
      mint: leaf.mintLeafCertificate,
    }));
    // A failed load is not kept, so the next connection tries again.
    this.#minter.catch(() => (this.#minter = undefined));
    return this.#minter;
  }
}
