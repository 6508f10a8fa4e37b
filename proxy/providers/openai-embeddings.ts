import { z } from 'zod';
import { parseOrThrow } from '../../core/errors/index.ts';
import { noTools, type AdapterDeps, type ParsedRequest } from './adapter.ts';
import {
  ChatMessageSchema,
  chatMessagesTokens,
  nonTextAmounts,
  refuseOtherModels,
  requireModel,
} from './openai-request.ts';
import { TextOrTokensSchema, textOrTokensCount, textOrTokensItems, type TextOrTokens } from './openai-token-input.ts';

/**
 * `/embeddings` in the OpenAI format: `input` as OpenAI takes it, or chat `messages` as vLLM takes
 * them to embed images and text together; a server that embeds images or audio given in `input` as
 * URLs or base64 says so by `modality` (Infinity).
 */
export const OpenAiEmbeddingsRequestSchema = z
  .looseObject({
    model: z.string().min(1).optional(),
    input: TextOrTokensSchema.optional(),
    messages: z.array(ChatMessageSchema).optional(),
    modality: z.string().optional(),
  })
  .refine((req) => req.input !== undefined || req.messages !== undefined, {
    path: ['input'],
    message: 'required (or messages)',
  });

/**
 * The inputs a `modality` other than text says are media: each an image at the image bound, any
 * other medium (audio) at least at the allowance for a part of unknown size, inline at least at its bytes.
 */
function mediaTokens(deps: AdapterDeps, input: TextOrTokens, modality: string): number {
  const amounts = nonTextAmounts(deps);
  let tokens = 0;
  for (const item of textOrTokensItems(input)) {
    const bytes = typeof item === 'string' ? Buffer.byteLength(item) : item.length;
    tokens += modality === 'image' ? amounts.image : Math.max(bytes, amounts.unknown);
  }
  return tokens;
}

/** Input only: the answer is vectors, and carries its usage. */
export function parseOpenAiEmbeddingsRequest(
  deps: AdapterDeps,
  body: unknown,
  pathModel: string | undefined,
): ParsedRequest {
  refuseOtherModels(body);
  const req = parseOrThrow(OpenAiEmbeddingsRequestSchema, body);
  const model = requireModel(req.model, pathModel);
  let tokens = req.messages === undefined ? 0 : chatMessagesTokens(deps, model, req.messages);
  if (req.input !== undefined)
    tokens +=
      req.modality === undefined || req.modality === 'text'
        ? textOrTokensCount(deps, model, req.input)
        : mediaTokens(deps, req.input, req.modality);
  return { model, stream: false, estimatedInputTokens: tokens, maxOutputTokens: 0, ...noTools() };
}
