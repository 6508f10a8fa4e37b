import { z } from 'zod';

interface EnumInputOptions {
  /** Wire prefixes to strip, e.g. `CONDITION_OPERATOR_` for gRPC enum names. */
  readonly prefixes?: readonly string[];
  /** Other surfaces' names for the same value, keyed by their upper-case form. */
  readonly aliases?: Readonly<Record<string, string>>;
  /** Canonical values are upper case unless stated; operators are lower case. */
  readonly lowerCase?: boolean;
}

/**
 * An input schema for a canonical enum that accepts every surface's spelling of it
 * (case-insensitive, gRPC prefixes, concept names) and yields the canonical value.
 */
export function enumInput<const T extends readonly [string, ...string[]]>(
  canonical: T,
  options: EnumInputOptions = {},
) {
  const prefixes = (options.prefixes ?? []).map((p) => p.toUpperCase());
  const aliases = options.aliases ?? {};
  const also = [...Object.keys(aliases), ...prefixes.map((p) => `${p}*`)];
  const description = `One of ${canonical.join(', ')}, case-insensitive${also.length > 0 ? `; also accepted: ${also.join(', ')}` : ''}.`;
  return z
    .string()
    .max(64)
    .meta({ description, examples: [...canonical] })
    .transform((raw) => {
      let name = raw.trim().toUpperCase();
      for (const prefix of prefixes) {
        if (name.startsWith(prefix)) {
          name = name.slice(prefix.length);
          break;
        }
      }
      name = aliases[name] ?? name;
      return options.lowerCase === true ? name.toLowerCase() : name;
    })
    .pipe(z.enum(canonical));
}
