export { loadOrCreateCa, type CaFileOptions, type LoadedCa } from './ca-files.ts';
export type { CaPem } from './ca-generate.ts';
export { LeafCertificateCache, type LeafCacheOptions, type LeafCacheStats } from './leaf-cache.ts';
export { writeTrustBundle } from './trust-bundle.ts';
