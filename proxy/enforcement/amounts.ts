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

/** Whether what is available holds all of `need` in both dimensions. */
export function covers(available: Allowance, need: Amount): boolean {
  return (
    (available.tokens === null || available.tokens >= need.tokens) &&
    (available.pico === null || available.pico >= need.pico)
  );
}

export function microsToPico(micros: number | null): number | null {
  return micros === null ? null : micros * PICO_PER_MICRO;
}
