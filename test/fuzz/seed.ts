import type fc from 'fast-check';

/**
 * Seed and run count of the fuzz suites. `FUZZ_SEED` replays a run; `FUZZ_RUNS` sets how many
 * generated inputs each property gets (200 for the sample `npm test` runs, more for `npm run fuzz`).
 * The seed is printed, so a failure can be replayed exactly.
 */
let seed: number | undefined;

/** One seed for the whole test file: `FUZZ_SEED` when given, else drawn once. */
export function fuzzSeed(): number {
  if (seed !== undefined) return seed;
  const given = process.env.FUZZ_SEED;
  if (given !== undefined && given !== '') {
    seed = Number(given);
    if (!Number.isSafeInteger(seed)) throw new Error(`FUZZ_SEED must be an integer, not ${given}`);
  } else seed = Math.floor(Math.random() * 0x7fffffff);
  return seed;
}

export function fuzzRuns(fallback = 200): number {
  const given = process.env.FUZZ_RUNS;
  if (given === undefined || given === '') return fallback;
  const runs = Number(given);
  if (!Number.isSafeInteger(runs) || runs < 1) throw new Error(`FUZZ_RUNS must be a positive integer, not ${given}`);
  return runs;
}

/** fast-check parameters for one property of a surface, announcing the seed to replay it. */
export function fuzzParameters(surface: string, numRuns = fuzzRuns()): fc.Parameters<unknown> {
  const seed = fuzzSeed();
  process.stdout.write(`fuzz ${surface}: seed ${seed}, ${numRuns} runs (replay with FUZZ_SEED=${seed})\n`);
  return { seed, numRuns, endOnFailure: true };
}
