import { z } from 'zod';
import { parseOrThrow } from '../../core/errors/index.ts';
import { noTools, type AdapterDeps, type ParsedRequest } from './adapter.ts';
import { asArray, asObject, asString, type JsonObject } from './json-access.ts';
import { requireModel } from './openai-request.ts';

const count = z.number().int().nonnegative();
const positive = z.number().int().positive();

/** The legacy Completions API (`/v1/completions`), still served by OpenAI and most compatible servers. */
export const OpenAiCompletionsRequestSchema = z.looseObject({
  model: z.string().min(1).optional(),
  prompt: z.union([z.string(), z.array(z.string()), z.array(z.number()), z.array(z.array(z.number()))]).nullish(),
  suffix: z.string().nullish(),
  stream: z.boolean().nullish(),
  max_tokens: count.nullish(),
  n: positive.nullish(),
  best_of: positive.nullish(),
});

/**
 * Prompts may be strings or token arrays (counted by length). The answer bound is
 * `max_tokens` per generated completion: `best_of` completions are generated and billed even
 * though only `n` are returned. A request without `max_tokens` is bounded like a chat request
 * (the model's table bound), not by the API's default of 16, which not every compatible
 * server applies.
 */
export function parseOpenAiCompletionsRequest(
  deps: AdapterDeps,
  body: unknown,
  pathModel: string | undefined,
): ParsedRequest {
  const req = parseOrThrow(OpenAiCompletionsRequestSchema, body);
  const model = requireModel(req.model, pathModel);
  const prompts: readonly unknown[] =
    req.prompt === undefined || req.prompt === null ? [] : typeof req.prompt === 'string' ? [req.prompt] : req.prompt;
  let input = req.suffix ? deps.tokens.countText(model, req.suffix) : 0;
  if (typeof prompts[0] === 'number') input += prompts.length;
  else
    for (const p of prompts) input += typeof p === 'string' ? deps.tokens.countText(model, p) : (p as number[]).length;
  const perCompletion = req.max_tokens ?? deps.defaultMaxOutputTokens(model);
  return {
    model,
    stream: req.stream === true,
    estimatedInputTokens: input,
    maxOutputTokens: perCompletion * Math.max(req.n ?? 1, req.best_of ?? 1),
    ...noTools(),
  };
}

/** The generated text of a legacy completion (`choices[].text`), counted when no usage is reported. */
export function completionsText(json: JsonObject): string {
  let text = '';
  for (const choice of asArray(json.choices)) text += asString(asObject(choice)?.text) ?? '';
  return text;
}
