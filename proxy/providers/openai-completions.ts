import { z } from 'zod';
import { parseOrThrow } from '../../core/errors/index.ts';
import { noTools, type AdapterDeps, type ParsedRequest } from './adapter.ts';
import { asArray, asObject, asString, type JsonObject } from './json-access.ts';
import { refuseOtherModels, requireModel } from './openai-request.ts';
import { TextOrTokensSchema, textOrTokensCount } from './openai-token-input.ts';

const count = z.number().int().nonnegative();
const positive = z.number().int().positive();

/** The legacy Completions API (`/v1/completions`), still served by OpenAI and most compatible servers. */
export const OpenAiCompletionsRequestSchema = z.looseObject({
  model: z.string().min(1).optional(),
  prompt: TextOrTokensSchema.nullish(),
  /** vLLM takes the prompt as the model's embeddings of its tokens too: base64 tensors, one row a token. */
  prompt_embeds: z.union([z.string(), z.array(z.string())]).nullish(),
  suffix: z.string().nullish(),
  stream: z.boolean().nullish(),
  max_tokens: count.nullish(),
  n: positive.nullish(),
  best_of: positive.nullish(),
});

/**
 * Prompts may be strings or token arrays (counted by length); prompt embeddings count at their
 * bytes, which outnumber the tokens they stand for (each row holds a token's whole vector). The answer bound is
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
  refuseOtherModels(body);
  const req = parseOrThrow(OpenAiCompletionsRequestSchema, body);
  const model = requireModel(req.model, pathModel);
  let input = req.suffix ? deps.tokens.countText(model, req.suffix) : 0;
  if (req.prompt != null) input += textOrTokensCount(deps, model, req.prompt);
  for (const embeds of [req.prompt_embeds ?? []].flat()) input += Buffer.byteLength(embeds);
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
