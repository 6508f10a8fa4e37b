import { z } from 'zod';
import { parseOrThrow } from '../../core/errors/index.ts';
import { noTools, type AdapterDeps, type ParsedRequest } from './adapter.ts';
import { textOf } from './json-access.ts';

const Content = z.looseObject({ parts: z.array(z.unknown()).optional() });

export const GeminiEmbedRequestSchema = z.looseObject({ content: Content });
export const GeminiBatchEmbedRequestSchema = z.looseObject({
  requests: z.array(z.looseObject({ content: Content })),
});

/**
 * `:embedContent` and `:batchEmbedContents`: input only (the answer is vectors, and carries no
 * usage), so the call is metered at the prompt's token estimate.
 */
export function parseGeminiEmbedRequest(
  deps: AdapterDeps,
  model: string,
  body: unknown,
  batch: boolean,
): ParsedRequest {
  const contents = batch
    ? parseOrThrow(GeminiBatchEmbedRequestSchema, body).requests.map((r) => r.content)
    : [parseOrThrow(GeminiEmbedRequestSchema, body).content];
  let input = 0;
  for (const content of contents) input += deps.tokens.countText(model, textOf(content.parts));
  return { model, stream: false, estimatedInputTokens: input, maxOutputTokens: 0, ...noTools() };
}
