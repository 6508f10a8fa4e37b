import { z } from 'zod';
import { parseOrThrow } from '../../core/errors/index.ts';
import { noTools, type AdapterDeps, type ParsedRequest } from './adapter.ts';
import { geminiAmounts, partsText } from './gemini-parts.ts';
import { nonTextTokens } from './non-text-input.ts';

const Content = z.looseObject({ parts: z.array(z.unknown()).optional() });
/** One text to embed: its parts, and the title of a document embedded for retrieval, which the model reads too. */
const EmbedRequest = z.looseObject({ content: Content, title: z.string().optional() });

export const GeminiEmbedRequestSchema = EmbedRequest;
export const GeminiBatchEmbedRequestSchema = z.looseObject({ requests: z.array(EmbedRequest) });

/**
 * `:embedContent` and `:batchEmbedContents`: input only (the answer is vectors, and carries no
 * usage), so the call is metered at the prompt's estimate: its text, and its parts that are not
 * text (an image, a video, a file: multimodal embedding models take them) as a generation
 * request's are.
 */
export function parseGeminiEmbedRequest(
  deps: AdapterDeps,
  model: string,
  body: unknown,
  batch: boolean,
): ParsedRequest {
  const requests = batch
    ? parseOrThrow(GeminiBatchEmbedRequestSchema, body).requests
    : [parseOrThrow(GeminiEmbedRequestSchema, body)];
  const amounts = geminiAmounts(deps);
  let input = 0;
  for (const { content, title } of requests) {
    input += deps.tokens.countText(model, title ?? '') + deps.tokens.countText(model, partsText(content.parts));
    input += nonTextTokens(content.parts, amounts);
  }
  return { model, stream: false, estimatedInputTokens: input, maxOutputTokens: 0, ...noTools() };
}
