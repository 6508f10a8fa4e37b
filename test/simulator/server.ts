import {
  createServer as createHttpServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { once } from 'node:events';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { TokenUsage } from '../../core/metering/prices.ts';
import { createTokenCounter } from '../../core/metering/tokens.ts';
import type { Operation, ProviderAdapter, ProviderId } from '../../proxy/providers/adapter.ts';
import { azureDeploymentFromPath, createAzureOpenAiAdapter } from '../../proxy/providers/azure-openai.ts';
import { createAnthropicAdapter } from '../../proxy/providers/anthropic.ts';
import { createGeminiAdapter, geminiModelFromPath } from '../../proxy/providers/gemini.ts';
import { createOpenAiAdapter } from '../../proxy/providers/openai.ts';
import { DEFAULT_MAX_EVENT_BYTES } from '../../proxy/providers/sse-framer.ts';
import { anthropicMessages } from './anthropic-sim.ts';
import type { SimHandler } from './context.ts';
import { resetAfterBytes } from './faults.ts';
import { geminiEmbed, geminiGenerate } from './gemini-sim.ts';
import { answerJudge, isJudgePrompt } from './judge-sim.ts';
import { openAiChat, openAiCompletions, openAiEmbeddings, openAiResponses } from './openai-sim.ts';
import { planReply } from './plan.ts';
import { sendJson } from './sse-writer.ts';

export interface SimulatorOptions {
  port?: number;
  host?: string;
  /** Serve HTTPS with this certificate and key (PEM). */
  tls?: { cert: string | Buffer; key: string | Buffer };
  /** Pause between stream events; `x-sim-chunk-delay-ms` overrides it per request. */
  chunkDelayMs?: number;
}

export interface RecordedRequest {
  method: string;
  /** Path and query as received. */
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  json: unknown;
  provider: ProviderId | null;
  operation: Operation | null;
  /** The usage the simulator put in its answer; set once the answer is complete. */
  usageSent: TokenUsage | undefined;
  /** The status it answered with. */
  status: number | undefined;
}

export interface Simulator {
  url: string;
  port: number;
  requests: RecordedRequest[];
  close(): Promise<void>;
}

interface Route {
  adapter: ProviderAdapter;
  provider: ProviderId;
  operation: Operation;
}

const HANDLERS: Record<Operation, SimHandler> = {
  chat: openAiChat,
  responses: openAiResponses,
  embeddings: openAiEmbeddings,
  completions: openAiCompletions,
  messages: anthropicMessages,
  generate: geminiGenerate,
  stream_generate: geminiGenerate,
  embed: geminiEmbed,
  batch_embed: geminiEmbed,
};

function maxTokensOf(body: Record<string, unknown>): number | undefined {
  const config = (body.generationConfig ?? body.generation_config) as Record<string, unknown> | undefined;
  for (const v of [
    body.max_completion_tokens,
    body.max_tokens,
    body.max_output_tokens,
    config?.maxOutputTokens,
    config?.max_output_tokens,
  ]) {
    if (typeof v === 'number' && Number.isInteger(v) && v >= 0) return v;
  }
  return undefined;
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * A provider stand-in speaking the OpenAI (also under Azure deployment paths and any prefix,
 * for OpenAI-compatible servers), Anthropic and Gemini wire formats. Answers are derived from
 * the request (see plan.ts); headers `x-sim-error-code` (with `x-sim-stream-error-after`)
 * make it answer the adapters' own refusal formats. A chat request carrying the Semantic Judge's
 * prompt is answered as a judge would (judge-sim.ts).
 */
export async function startSimulator(options: SimulatorOptions = {}): Promise<Simulator> {
  const tokens = createTokenCounter();
  const deps = {
    tokens,
    maxEventBytes: DEFAULT_MAX_EVENT_BYTES,
    defaultMaxOutputTokens: () => 4096,
    maxToolArgsChars: 65_537,
    serverContextTokens: 128_000,
  };
  const openai = createOpenAiAdapter(deps);
  const anthropic = createAnthropicAdapter(deps);
  const gemini = createGeminiAdapter(deps);
  const requests: RecordedRequest[] = [];

  const azure = createAzureOpenAiAdapter(deps);

  // OpenAI-compatible servers serve the OpenAI routes under any base path: the part from the
  // last `/v1/` on is what the OpenAI routes are matched against.
  function route(method: string, path: string): Route | null {
    for (const adapter of [gemini, anthropic, azure, openai]) {
      const operation = adapter.classify(method, path);
      if (operation) return { adapter, provider: adapter.id, operation };
      // A stored response or chat completion read back is answered whole, as the call would be now.
      const match = adapter.route(method, path);
      if (match?.kind === 'stored' && match.shape === 'response')
        return { adapter, provider: adapter.id, operation: 'responses' };
      if (match?.kind === 'stored' && match.shape === 'completion')
        return { adapter, provider: adapter.id, operation: 'chat' };
    }
    const v1 = path.lastIndexOf('/v1/');
    const operation = v1 > 0 ? openai.classify(method, path.slice(v1)) : null;
    return operation ? { adapter: openai, provider: 'openai-compatible', operation } : null;
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = req.url ?? '/';
    const method = req.method ?? 'GET';
    const body = await readBody(req);
    let json: unknown;
    try {
      json = body.length > 0 ? JSON.parse(body) : undefined;
    } catch {
      json = undefined;
    }
    const found = route(method, path);
    const record: RecordedRequest = {
      method,
      path,
      headers: req.headers,
      body,
      json,
      provider: found?.provider ?? null,
      operation: found?.operation ?? null,
      usageSent: undefined,
      status: undefined,
    };
    requests.push(record);
    res.on('finish', () => {
      record.status = res.statusCode;
    });
    if (!found && method === 'POST' && new URL(path, 'http://simulator').pathname === '/v1/images/generations') {
      // A call on no route the proxy meters: charged at the estimate of its bytes.
      // `x-sim-image-bytes`: an image that large, sent in pieces of 16 KiB as it is encoded (with
      // `x-sim-chunk-delay-ms` between them), of a known length unless `x-sim-chunked`.
      const imageBytes = Number(req.headers['x-sim-image-bytes'] ?? 0);
      const image = { created: 1_700_000_000, data: [{ b64_json: 'iVBORw0KGgo=' + 'A'.repeat(imageBytes) }] };
      if (imageBytes > 0) {
        const text = JSON.stringify(image);
        const delayMs = Number(req.headers['x-sim-chunk-delay-ms'] ?? 0);
        res.writeHead(200, {
          'content-type': 'application/json',
          ...(req.headers['x-sim-chunked'] === undefined ? { 'content-length': text.length } : {}),
        });
        for (let at = 0; at < text.length && !res.destroyed; at += 16_384) {
          if (at > 0 && delayMs > 0) await sleep(delayMs);
          if (!res.write(text.slice(at, at + 16_384))) await Promise.race([once(res, 'drain'), once(res, 'close')]);
        }
        res.end();
        return;
      }
      if (req.headers['x-sim-chunked'] === undefined) {
        sendJson(res, 200, image);
        return;
      }
      // Without a length, in two pieces a moment apart: the answer's end is its last chunk.
      const text = JSON.stringify(image);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write(text.slice(0, 20));
      await sleep(20);
      res.end(text.slice(20));
      return;
    }
    if (!found && method === 'GET' && anthropic.route(method, path)?.kind === 'stored') {
      // A message batch's results: one JSON line per request, here one, answered as the
      // request's x-sim headers plan it.
      const plan = planReply({
        headers: req.headers,
        bodyBytes: 0,
        model: 'claude-sim',
        maxTokens: undefined,
        defaultDelayMs: 0,
      });
      const content = plan.toolCall
        ? [{ type: 'tool_use', id: 'toolu_sim', name: plan.toolCall, input: { input: 'sim' } }]
        : [{ type: 'text', text: plan.words.join('') }];
      const message = { id: 'msg_sim', type: 'message', role: 'assistant', model: plan.model, content };
      res.writeHead(200, { 'content-type': 'application/binary' });
      res.end(JSON.stringify({ custom_id: 'request-1', result: { type: 'succeeded', message } }) + '\n');
      return;
    }
    if (!found) {
      sendJson(res, 404, {
        error: {
          message: `simulator: no route for ${method} ${path}`,
          type: 'invalid_request_error',
          code: null,
          param: null,
        },
      });
      return;
    }
    const bodyObject = typeof json === 'object' && json !== null ? (json as Record<string, unknown>) : {};
    const url = new URL(path, 'http://simulator');
    const model =
      typeof bodyObject.model === 'string'
        ? bodyObject.model
        : (geminiModelFromPath(path) ?? azureDeploymentFromPath(path) ?? 'unknown-model');
    if (found.operation === 'chat' && isJudgePrompt(bodyObject)) {
      await answerJudge(res, bodyObject, Buffer.byteLength(body));
      return;
    }
    const plan = planReply({
      headers: req.headers,
      bodyBytes: Buffer.byteLength(body),
      model,
      maxTokens: maxTokensOf(bodyObject),
      defaultDelayMs: options.chunkDelayMs ?? 0,
    });
    if (plan.firstByteDelayMs > 0) await sleep(plan.firstByteDelayMs);
    if (plan.resetAfterBytes !== undefined) resetAfterBytes(res, plan.resetAfterBytes);
    if (plan.errorCode !== undefined && plan.streamErrorAfter === undefined) {
      const reply = found.adapter.errorResponse(plan.errorCode, 'simulated refusal');
      res.writeHead(reply.status, reply.headers);
      res.end(reply.body);
      return;
    }
    // A stored response read back with `?stream=true` is replayed as its stream.
    const stream =
      found.operation === 'stream_generate' ||
      bodyObject.stream === true ||
      (method === 'GET' && url.searchParams.get('stream') === 'true');
    record.usageSent = await HANDLERS[found.operation]({
      res,
      plan,
      body: bodyObject,
      adapter: found.adapter,
      stream,
      query: url.searchParams,
    });
  }

  const listener = (req: IncomingMessage, res: ServerResponse) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent)
        sendJson(res, 500, { error: { message: `simulator: ${(err as Error).message}`, type: 'server_error' } });
      else res.destroy();
    });
  };
  const server: Server = options.tls
    ? createHttpsServer({ cert: options.tls.cert, key: options.tls.key }, listener)
    : createHttpServer(listener);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const host = options.host ?? '127.0.0.1';
  return {
    url: `${options.tls ? 'https' : 'http'}://${host}:${port}`,
    port,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => {
          tokens.free();
          resolve();
        });
      }),
  };
}
