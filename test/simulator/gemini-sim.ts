import type { TokenUsage } from '../../core/metering/prices.ts';
import { usageOf, writeDeltas, type SimContext } from './context.ts';
import { sendJson, startStream } from './sse-writer.ts';

function usageMetadata(u: TokenUsage, final: boolean): Record<string, unknown> {
  if (!final) return { promptTokenCount: u.input, totalTokenCount: u.input };
  return {
    promptTokenCount: u.input,
    candidatesTokenCount: u.output,
    totalTokenCount: u.input + u.output,
    ...(u.cachedInput > 0 ? { cachedContentTokenCount: u.cachedInput } : {}),
  };
}

/** Grounding with Google Search: the queries it ran and the entry point Google asks to be shown. */
function groundingMetadata(searches: number): Record<string, unknown> {
  return {
    webSearchQueries: Array.from({ length: searches }, (_, i) => `sim query ${i + 1}`),
    searchEntryPoint: { renderedContent: '<div>sim</div>' },
  };
}

function candidate(parts: unknown[], finishReason?: string, searches = 0): Record<string, unknown> {
  return {
    content: { parts, role: 'model' },
    index: 0,
    ...(finishReason ? { finishReason } : {}),
    ...(searches > 0 ? { groundingMetadata: groundingMetadata(searches) } : {}),
  };
}

/**
 * `generateContent` answers one JSON object; `streamGenerateContent` a streamed JSON array, or
 * SSE `data:` events with `alt=sse`, the last one carrying the finish reason and full usage.
 */
export async function geminiGenerate(ctx: SimContext): Promise<TokenUsage> {
  const { plan } = ctx;
  const grounded = plan.webSearches > 0;
  const usage = { ...usageOf(plan, plan.words.length), ...(grounded ? { hosted: { google_search: 1 } } : {}) };
  const base = { modelVersion: plan.model, responseId: 'sim' };
  const callPart = plan.toolCall
    ? { functionCall: { name: plan.toolCall, args: { input: plan.words.join('').trim() } } }
    : undefined;
  if (!ctx.stream) {
    sendJson(ctx.res, 200, {
      candidates: [candidate([callPart ?? { text: plan.words.join('') }], 'STOP', plan.webSearches)],
      usageMetadata: usageMetadata(usage, true),
      ...base,
    });
    return usage;
  }
  const sseMode = ctx.query.get('alt') === 'sse';
  const elements = plan.words.map((w, i) => {
    const last = i === plan.words.length - 1;
    const parts = last && callPart ? [{ text: w }, callPart] : [{ text: w }];
    return JSON.stringify({
      candidates: [candidate(parts, last ? 'STOP' : undefined, last ? plan.webSearches : 0)],
      usageMetadata: usageMetadata(usage, last),
      ...base,
    });
  });
  const out = startStream(ctx.res, sseMode ? 'text/event-stream' : 'application/json', plan);
  const frames = sseMode
    ? elements.map((e) => `data: ${e}\r\n\r\n`)
    : elements.map((e, i) => (i === 0 ? `[${e}` : `,\r\n${e}`));
  // In a JSON-array stream the error is one more element, closing the array.
  const arrayError = (sent: number) => {
    const payload = ctx.adapter.errorResponse(plan.errorCode ?? 'SVC-SYS-9007', 'simulated refusal mid-stream').body;
    return sent === 0 ? `[${payload}]` : `,\r\n${payload}]`;
  };
  const { sent, failed } = await writeDeltas(ctx, out, frames, sseMode ? undefined : arrayError);
  if (failed) return usageOf(plan, sent);
  if (!sseMode) await out.write(elements.length === 0 ? '[]' : ']');
  out.end();
  return usage;
}

/** `:embedContent` and `:batchEmbedContents`: vectors only, no usage (as Gemini answers). */
export function geminiEmbed(ctx: SimContext): Promise<TokenUsage> {
  const values = [0.25, -0.5, 0.125];
  const requests = Array.isArray(ctx.body.requests) ? ctx.body.requests : undefined;
  sendJson(ctx.res, 200, requests ? { embeddings: requests.map(() => ({ values })) } : { embedding: { values } });
  return Promise.resolve({ input: ctx.plan.inputTokens, output: 0, cachedInput: 0 });
}
