import type { TokenUsage } from '../../core/metering/prices.ts';
import { usageOf, writeDeltas, type SimContext } from './context.ts';
import { sendJson, sse, startStream } from './sse-writer.ts';

/** Anthropic counts cache reads and writes apart from `input_tokens`, writes by how long they are kept. */
function anthropicUsage(u: TokenUsage): Record<string, unknown> {
  const short = u.cacheWrite ?? 0;
  const long = u.cacheWriteLong ?? 0;
  return {
    input_tokens: u.input - u.cachedInput - short - long,
    cache_creation_input_tokens: short + long,
    cache_read_input_tokens: u.cachedInput,
    cache_creation: { ephemeral_5m_input_tokens: short, ephemeral_1h_input_tokens: long },
    output_tokens: u.output,
    ...(u.hosted?.web_search === undefined ? {} : { server_tool_use: { web_search_requests: u.hosted.web_search } }),
  };
}

/** The usage with the searches the answer made, as Anthropic's usage counts them. */
function withSearches(u: TokenUsage, searches: number): TokenUsage {
  return searches > 0 ? { ...u, hosted: { web_search: searches } } : u;
}

export async function anthropicMessages(ctx: SimContext): Promise<TokenUsage> {
  const { plan } = ctx;
  const usage = withSearches(usageOf(plan, plan.words.length), plan.webSearches);
  const text = plan.words.join('');
  const stopReason = plan.toolCall ? 'tool_use' : 'end_turn';
  const block = plan.toolCall
    ? plan.toolKind === 'hosted'
      ? { type: 'server_tool_use', id: 'srvtoolu_sim', name: plan.toolCall, input: { input: text.trim() } }
      : { type: 'tool_use', id: 'toolu_sim', name: plan.toolCall, input: { input: text.trim() } }
    : { type: 'text', text };
  const message = { id: 'msg_sim', type: 'message', role: 'assistant', model: plan.model };
  if (!ctx.stream) {
    sendJson(ctx.res, 200, {
      ...message,
      content: [block],
      stop_reason: stopReason,
      stop_sequence: null,
      usage: anthropicUsage(usage),
    });
    return usage;
  }
  const out = startStream(ctx.res, 'text/event-stream; charset=utf-8', plan);
  await out.write(
    sse(
      {
        type: 'message_start',
        message: {
          ...message,
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: anthropicUsage(usageOf(plan, 1)),
        },
      },
      'message_start',
    ),
  );
  const start = plan.toolCall ? { ...block, input: {} } : { type: 'text', text: '' };
  await out.write(sse({ type: 'content_block_start', index: 0, content_block: start }, 'content_block_start'));
  await out.write(sse({ type: 'ping' }, 'ping'));
  const deltas = plan.toolCall
    ? [...plan.words.map((w, i) => (i === 0 ? `{"input": "${w.trim()}` : w)), '"}'].map((partial) => ({
        type: 'input_json_delta',
        partial_json: partial,
      }))
    : plan.words.map((w) => ({ type: 'text_delta', text: w }));
  const frames = deltas.map((delta) => sse({ type: 'content_block_delta', index: 0, delta }, 'content_block_delta'));
  const { sent, failed } = await writeDeltas(ctx, out, frames);
  if (failed) return usageOf(plan, sent);
  await out.write(sse({ type: 'content_block_stop', index: 0 }, 'content_block_stop'));
  await out.write(
    sse(
      {
        type: 'message_delta',
        delta: { stop_reason: stopReason, stop_sequence: null },
        usage: {
          output_tokens: usage.output,
          ...(plan.webSearches > 0 ? { server_tool_use: { web_search_requests: plan.webSearches } } : {}),
        },
      },
      'message_delta',
    ),
  );
  await out.write(sse({ type: 'message_stop' }, 'message_stop'));
  out.end();
  return usage;
}
