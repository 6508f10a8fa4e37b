import { RE2JS } from 're2js';

/**
 * An RE2 pattern compiled on its first use. Compiling the judge's patterns costs tens of
 * megabytes and a few hundred milliseconds; a proxy whose rulesets never ask the built-in judge
 * never pays it, and one that does pays for each pattern once, on the first text that reaches it.
 */
export function lazyRegex(pattern: string, flags = 0): () => RE2JS {
  let regex: RE2JS | undefined;
  return () => (regex ??= RE2JS.compile(pattern, flags));
}
