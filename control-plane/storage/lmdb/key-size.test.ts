import { describe, expect, it } from 'vitest';
import { encodedKeySize, LMDB_MAX_KEY_BYTES, surelyFits } from './key-size.ts';

/** Characters the encoder sizes differently: escaped, 1 to 4 bytes of UTF-8, a lone surrogate. */
const ALPHABET = ['\u0000', '\u0004', '\u001b', 'a', 'é', '€', '\u{1F600}', '\ud800'];

function randomPart(random: () => number, maxLength: number): string {
  let part = '';
  const length = Math.floor(random() * maxLength);
  while (part.length < length) part += ALPHABET[Math.floor(random() * ALPHABET.length)];
  return part;
}

/** A small deterministic generator, so that a failure can be run again. */
function seeded(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1_103_515_245 + 12_345) % 2 ** 31;
    return state / 2 ** 31;
  };
}

describe('surelyFits', () => {
  it('never passes a key whose encoded size is past what LMDB stores', () => {
    const random = seeded(7);
    let passed = 0;
    let left = 0;
    for (let i = 0; i < 20_000; i++) {
      const prefix = Array.from({ length: 1 + Math.floor(random() * 3) }, () => randomPart(random, 300));
      const id = random() < 0.2 ? Math.floor(random() * 1e9) : randomPart(random, 700);
      const size = encodedKeySize([...prefix, id]);
      if (surelyFits(prefix, id)) {
        expect(size).toBeLessThanOrEqual(LMDB_MAX_KEY_BYTES);
        passed++;
      } else if (size <= LMDB_MAX_KEY_BYTES) left++;
    }
    // Both ways taken: keys passed at once, and keys that fit left to the exact measure.
    expect(passed).toBeGreaterThan(1000);
    expect(left).toBeGreaterThan(100);
  });

  it('passes the keys records are stored under, and leaves one near the bound to the exact measure', () => {
    expect(surelyFits(['acme', 'envelope'], '0b6f3c1e-8a2d-4f5e-9c7b-1d2e3f4a5b6c')).toBe(true);
    expect(surelyFits(['acme', 'audit'], 123_456)).toBe(true);
    expect(surelyFits(['acme', 'budget'], 'b'.repeat(LMDB_MAX_KEY_BYTES - 20))).toBe(false);
  });
});
