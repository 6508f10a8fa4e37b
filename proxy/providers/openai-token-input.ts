import { z } from 'zod';
import type { AdapterDeps } from './adapter.ts';

const TokenIds = z.array(z.number());

/**
 * What the legacy completions' `prompt` and the embeddings' `input` take: a text, texts, token ids,
 * or lists of token ids. Anything else (an object, a list mixing kinds) is refused, naming the field.
 */
export const TextOrTokensSchema = z.union([z.string(), z.array(z.string()), TokenIds, z.array(TokenIds)], {
  error: 'expected a string, an array of strings, an array of token ids or an array of arrays of token ids',
});
export type TextOrTokens = z.infer<typeof TextOrTokensSchema>;

/** The input tokens of such a value: each text counted, each token id one token. */
export function textOrTokensCount(deps: AdapterDeps, model: string, value: TextOrTokens): number {
  if (typeof value === 'string') return deps.tokens.countText(model, value);
  let tokens = 0;
  for (const item of value)
    tokens +=
      typeof item === 'string' ? deps.tokens.countText(model, item) : typeof item === 'number' ? 1 : item.length;
  return tokens;
}

/** The items of such a value: one text, each text, the one list of token ids, or each list of them. */
export function textOrTokensItems(value: TextOrTokens): readonly (string | readonly number[])[] {
  if (typeof value === 'string') return [value];
  if (value.length > 0 && typeof value[0] === 'number') return [value as number[]];
  return value as (string | number[])[];
}
