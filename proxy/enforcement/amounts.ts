/** Tokens and pico-dollars together: the two dimensions every budget reservation carries. */
export interface Amount {
  tokens: number;
  pico: number;
}

export const PICO_PER_MICRO = 1_000_000;

/** A limit per dimension; null means unlimited. */
export interface Allowance {
  tokens: number | null;
  pico: number | null;
}

export const ZERO: Amount = { tokens: 0, pico: 0 };

export function microsToPico(micros: number | null): number | null {
  return micros === null ? null : micros * PICO_PER_MICRO;
}
