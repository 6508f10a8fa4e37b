import type { TokenUsage } from '../../core/metering/prices.ts';
import { usageOf, writeDeltas, type SimContext } from './context.ts';
import type { ReplyPlan } from './plan.ts';
import { sendJson, sse, startStream } from './sse-writer.ts';

const CREATED = 1_700_000_000;

function chatUsage(u: TokenUsage): Record<string, unknown> {
  return {
    prompt_tokens: u.input,
    completion_tokens: u.output,
    total_tokens: u.input + u.output,
    prompt_tokens_details: { cached_tokens: u.cachedInput, audio_tokens: 0 },
    completion_tokens_details: {
      reasoning_tokens: 0,
      audio_tokens: 0,
      accepted_prediction_tokens: 0,
      rejected_prediction_tokens: 0,
    },
  };
}

function toolArguments(plan: ReplyPlan): string {
  return plan.toolArgs ?? JSON.stringify({ input: plan.words.join('').trim() });
}

/** Arguments streamed in three pieces, as models send them: no piece is valid JSON on its own. */
function argumentPieces(args: string): string[] {
  const third = Math.ceil(args.length / 3);
  return [args.slice(0, third), args.slice(third, 2 * third), args.slice(2 * third)].filter((p) => p !== '');
}

/** The tier OpenAI says it served at: the one asked for, priority or else the default. */
function servedTier(ctx: SimContext): string {
  return ctx.plan.serviceTier ?? (ctx.body.service_tier === 'priority' ? 'priority' : 'default');
}

export async function openAiChat(ctx: SimContext): Promise<TokenUsage> {
  const { plan } = ctx;
  const usage = usageOf(plan, plan.words.length);
  const base = {
    id: 'chatcmpl-sim',
    created: CREATED,
    model: plan.model,
    service_tier: servedTier(ctx),
    system_fingerprint: 'fp_sim',
  };
  const finish = plan.toolCall ? 'tool_calls' : 'stop';
  if (!ctx.stream) {
    const message = plan.toolCall
      ? {
          role: 'assistant',
          content: null,
          refusal: null,
          tool_calls: [
            {
              id: 'call_sim',
              type: 'function',
              function: { name: plan.toolCall, arguments: toolArguments(plan) },
            },
          ],
        }
      : { role: 'assistant', content: plan.words.join(''), refusal: null };
    sendJson(ctx.res, 200, {
      ...base,
      object: 'chat.completion',
      choices: [{ index: 0, message, logprobs: null, finish_reason: finish }],
      usage: chatUsage(usage),
    });
    return usage;
  }
  const streamOptions = ctx.body.stream_options as { include_usage?: boolean } | undefined;
  const includeUsage = streamOptions?.include_usage === true;
  const chunk = (delta: unknown, finishReason: string | null = null) =>
    sse({
      ...base,
      object: 'chat.completion.chunk',
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
      ...(includeUsage ? { usage: null } : {}),
    });
  const out = startStream(ctx.res, 'text/event-stream', plan);
  const frames = plan.toolCall
    ? [
        chunk({
          role: 'assistant',
          content: null,
          tool_calls: [
            { index: 0, id: 'call_sim', type: 'function', function: { name: plan.toolCall, arguments: '' } },
          ],
        }),
        ...(plan.toolArgs === undefined
          ? [
              ...plan.words.map((w, i) =>
                chunk({ tool_calls: [{ index: 0, function: { arguments: i === 0 ? `{"input":"${w.trim()}` : w } }] }),
              ),
              chunk({ tool_calls: [{ index: 0, function: { arguments: '"}' } }] }),
            ]
          : argumentPieces(plan.toolArgs).map((piece) =>
              chunk({ tool_calls: [{ index: 0, function: { arguments: piece } }] }),
            )),
      ]
    : [chunk({ role: 'assistant', content: '', refusal: null }), ...plan.words.map((w) => chunk({ content: w }))];
  const { sent, failed } = await writeDeltas(ctx, out, frames);
  if (failed) return usageOf(plan, Math.max(0, sent - 1));
  await out.write(chunk({}, finish));
  if (includeUsage)
    await out.write(sse({ ...base, object: 'chat.completion.chunk', choices: [], usage: chatUsage(usage) }));
  await out.write('data: [DONE]\n\n');
  out.end();
  return usage;
}

function responsesUsage(u: TokenUsage): Record<string, unknown> {
  return {
    input_tokens: u.input,
    input_tokens_details: { cached_tokens: u.cachedInput },
    output_tokens: u.output,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: u.input + u.output,
  };
}

/**
 * A Responses tool call item by the kind of tool: a custom tool's carries free text as `input`
 * where a function's carries `arguments`; a remote MCP server's tool, which OpenAI calls itself,
 * carries `arguments` and its server's label.
 */
const RESPONSES_TOOL_ITEMS = {
  function: {
    type: 'function_call',
    itemId: 'fc_sim',
    argsField: 'arguments',
    deltaType: 'response.function_call_arguments.delta',
    extra: { call_id: 'call_sim' },
  },
  custom: {
    type: 'custom_tool_call',
    itemId: 'ctc_sim',
    argsField: 'input',
    deltaType: 'response.custom_tool_call_input.delta',
    extra: { call_id: 'call_sim' },
  },
  hosted: {
    type: 'mcp_call',
    itemId: 'mcp_sim',
    argsField: 'arguments',
    deltaType: 'response.mcp_call_arguments.delta',
    extra: { server_label: 'sim' },
  },
} as const;

/** The web search calls of a Responses answer, ahead of its message or tool call. */
function webSearchCalls(count: number): Record<string, unknown>[] {
  return Array.from({ length: count }, (_, i) => ({
    type: 'web_search_call',
    id: `ws_sim_${i}`,
    status: 'completed',
    action: { type: 'search', query: `sim query ${i + 1}` },
  }));
}

/** The images of the image generation tool, each of a `quality/size` the plan names, ahead of the message. */
function imageCalls(images: readonly string[]): Record<string, unknown>[] {
  return images.map((image, i) => {
    const [quality, size] = image.split('/');
    return {
      type: 'image_generation_call',
      id: `ig_sim_${i}`,
      status: 'completed',
      quality,
      size,
      result: 'iVBORw0KGgo=',
    };
  });
}

/** The fee OpenAI bills an image at, by its quality and longer side. */
function imageFee(image: string): string {
  const [quality, size] = image.split('/');
  return `image_${quality}_${size === '1024x1024' ? 1024 : 1536}`;
}

/** The fee OpenAI bills the searches at: the preview tool's, when the request declares it. */
function searchFee(ctx: SimContext): 'web_search' | 'web_search_preview' {
  const tools = Array.isArray(ctx.body.tools) ? (ctx.body.tools as { type?: unknown }[]) : [];
  return tools.some((t) => typeof t.type === 'string' && t.type.startsWith('web_search_preview'))
    ? 'web_search_preview'
    : 'web_search';
}

export async function openAiResponses(ctx: SimContext): Promise<TokenUsage> {
  const { plan } = ctx;
  const hostedItems = [...webSearchCalls(plan.webSearches), ...imageCalls(plan.images)];
  const at = hostedItems.length;
  const hosted: Record<string, number> = {};
  if (plan.webSearches > 0) hosted[searchFee(ctx)] = plan.webSearches;
  for (const image of plan.images) hosted[imageFee(image)] = (hosted[imageFee(image)] ?? 0) + 1;
  const usage: TokenUsage = { ...usageOf(plan, plan.words.length), ...(at > 0 ? { hosted } : {}) };
  const text = plan.words.join('');
  const { type, itemId, argsField, deltaType, extra } = RESPONSES_TOOL_ITEMS[plan.toolKind];
  const item = plan.toolCall
    ? { type, id: itemId, ...extra, name: plan.toolCall, [argsField]: toolArguments(plan), status: 'completed' }
    : {
        type: 'message',
        id: 'msg_sim',
        status: 'completed',
        role: 'assistant',
        content: [{ type: 'output_text', text, annotations: [] }],
      };
  const response = (status: string, output: unknown[], u: unknown) => ({
    id: 'resp_sim',
    object: 'response',
    created_at: CREATED,
    status,
    model: plan.model,
    service_tier: servedTier(ctx),
    tools: ctx.body.tools ?? [],
    output,
    usage: u,
    error: null,
    incomplete_details: null,
  });
  if (!ctx.stream) {
    sendJson(ctx.res, 200, response('completed', [...hostedItems, item], responsesUsage(usage)));
    return usage;
  }
  let seq = 0;
  const event = (type: string, data: Record<string, unknown>) => sse({ type, sequence_number: seq++, ...data }, type);
  const out = startStream(ctx.res, 'text/event-stream', plan);
  await out.write(event('response.created', { response: response('in_progress', [], null) }));
  // An item starts with its kind and id alone: an image says its quality and size once done.
  const hostedFrames = hostedItems.flatMap((hostedItem, i) => [
    event('response.output_item.added', {
      output_index: i,
      item: { type: hostedItem.type, id: hostedItem.id, status: 'in_progress' },
    }),
    event('response.output_item.done', { output_index: i, item: hostedItem }),
  ]);
  const frames = plan.toolCall
    ? [
        ...hostedFrames,
        event('response.output_item.added', {
          output_index: at,
          item: { ...item, [argsField]: '', status: 'in_progress' },
        }),
        ...(plan.toolArgs === undefined ? plan.words : argumentPieces(plan.toolArgs)).map((w) =>
          event(deltaType, { item_id: itemId, output_index: at, delta: w }),
        ),
      ]
    : [
        ...hostedFrames,
        event('response.output_item.added', {
          output_index: at,
          item: { ...item, status: 'in_progress', content: [] },
        }),
        event('response.content_part.added', {
          item_id: 'msg_sim',
          output_index: at,
          content_index: 0,
          part: { type: 'output_text', text: '', annotations: [] },
        }),
        ...plan.words.map((w) =>
          event('response.output_text.delta', { item_id: 'msg_sim', output_index: at, content_index: 0, delta: w }),
        ),
      ];
  const { sent, failed } = await writeDeltas(ctx, out, frames);
  if (failed) return usageOf(plan, Math.max(0, sent - hostedFrames.length - (plan.toolCall ? 1 : 2)));
  if (!plan.toolCall)
    await out.write(
      event('response.output_text.done', { item_id: 'msg_sim', output_index: at, content_index: 0, text }),
    );
  await out.write(event('response.output_item.done', { output_index: at, item }));
  await out.write(
    event('response.completed', { response: response('completed', [...hostedItems, item], responsesUsage(usage)) }),
  );
  out.end();
  return usage;
}

function embeddingOf(text: string, encoding: string): number[] | string {
  const vector = Float32Array.from({ length: 8 }, (_, i) => ((text.length + i) % 10) / 10);
  return encoding === 'base64' ? Buffer.from(vector.buffer).toString('base64') : Array.from(vector);
}

export function openAiEmbeddings(ctx: SimContext): Promise<TokenUsage> {
  const { plan, body } = ctx;
  // vLLM embeds chat `messages` (images with text) as one input.
  const inputs: unknown[] = Array.isArray(body.input) ? body.input : [body.input ?? body.messages];
  const encoding = typeof body.encoding_format === 'string' ? body.encoding_format : 'float';
  const data = inputs.map((input, index) => ({
    object: 'embedding',
    index,
    embedding: embeddingOf(JSON.stringify(input), encoding),
  }));
  sendJson(ctx.res, 200, {
    object: 'list',
    data,
    model: plan.model,
    usage: { prompt_tokens: plan.inputTokens, total_tokens: plan.inputTokens },
  });
  return Promise.resolve({ input: plan.inputTokens, output: 0, cachedInput: 0 });
}

/** The legacy Completions API: `choices[].text`, whole or streamed (usage chunk with `stream_options.include_usage`). */
export async function openAiCompletions(ctx: SimContext): Promise<TokenUsage> {
  const { plan } = ctx;
  const usage = usageOf(plan, plan.words.length);
  const base = { id: 'cmpl-sim', object: 'text_completion', created: CREATED, model: plan.model };
  const choice = (text: string, finish: string | null) => ({ index: 0, text, logprobs: null, finish_reason: finish });
  if (!ctx.stream) {
    sendJson(ctx.res, 200, {
      ...base,
      choices: [choice(plan.words.join(''), 'length')],
      usage: { prompt_tokens: usage.input, completion_tokens: usage.output, total_tokens: usage.input + usage.output },
    });
    return usage;
  }
  const streamOptions = ctx.body.stream_options as { include_usage?: boolean } | undefined;
  const out = startStream(ctx.res, 'text/event-stream', plan);
  const { sent, failed } = await writeDeltas(
    ctx,
    out,
    plan.words.map((w) => sse({ ...base, choices: [choice(w, null)] })),
  );
  if (failed) return usageOf(plan, sent);
  await out.write(sse({ ...base, choices: [choice('', 'length')] }));
  if (streamOptions?.include_usage === true)
    await out.write(
      sse({
        ...base,
        choices: [],
        usage: {
          prompt_tokens: usage.input,
          completion_tokens: usage.output,
          total_tokens: usage.input + usage.output,
        },
      }),
    );
  await out.write('data: [DONE]\n\n');
  out.end();
  return usage;
}
