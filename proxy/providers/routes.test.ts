import { describe, expect, it } from 'vitest';
import { createTokenCounter } from '../../core/metering/tokens.ts';
import type { ProviderAdapter } from './adapter.ts';
import { createAnthropicAdapter } from './anthropic.ts';
import { createAzureOpenAiAdapter } from './azure-openai.ts';
import { createGeminiAdapter } from './gemini.ts';
import { createOpenAiCompatibleAdapter } from './openai-compatible.ts';
import { createOpenAiAdapter } from './openai.ts';
import {
  azureDeploymentFromPath,
  azureDeploymentNamedIn,
  geminiModelFromPath,
  geminiModelNamedIn,
  normalizeBasePath,
  normalizeRoutePath,
} from './routes.ts';

const deps = {
  tokens: createTokenCounter(),
  defaultMaxOutputTokens: () => 4096,
  maxEventBytes: 8 * 1024 * 1024,
  maxToolArgsChars: 65_537,
  serverContextTokens: 128_000,
};
/** An operation, 'free', 'stored:<shape>', or null for no route. */
type Expected = string | null;

function check(adapter: ProviderAdapter, rows: readonly [string, string, Expected][]): void {
  it.each(rows)('%s %s → %s', (method, path, expected) => {
    const match = adapter.route(method, path);
    const got =
      match === null
        ? null
        : match.kind === 'free'
          ? 'free'
          : match.kind === 'stored'
            ? `stored:${match.shape}`
            : match.kind === 'denied'
              ? 'denied'
              : match.op;
    expect(got).toBe(expected);
    const metered =
      expected === 'free' || expected === 'denied' || expected?.startsWith('stored:') === true ? null : expected;
    expect(adapter.classify(method, path)).toBe(metered);
  });
}

describe('OpenAI routes', () => {
  check(createOpenAiAdapter(deps), [
    ['POST', '/v1/chat/completions', 'chat'],
    ['post', '/v1/chat/completions', 'chat'],
    ['POST', '/v1/chat/completions?x=1', 'chat'],
    ['POST', '/v1/chat/completions/', 'chat'],
    ['POST', '/v1//chat/completions', 'chat'],
    ['POST', '/v1/responses', 'responses'],
    ['POST', '/v1/embeddings', 'embeddings'],
    ['POST', '/v1/completions', 'completions'],
    ['POST', '/v1/responses/input_tokens', 'free'],
    ['POST', '/v1/moderations', 'free'],
    // A suffix is not a route: these used to pass as chat and be metered as one.
    ['POST', '/v1/files/x/chat/completions', null],
    ['POST', '/evil/chat/completions', null],
    ['POST', '/chat/completions', null],
    ['POST', '/v2/chat/completions', null],
    ['POST', '/v1/chat/completions/extra', null],
    ['POST', '/v1/chat%2Fcompletions', null],
    ['POST', '/V1/Chat/Completions', null],
    ['POST', '/v1/responses/resp_1/cancel', null],
    ['POST', '/v1/files', null],
    // Work run and billed after the request returns.
    ['POST', '/v1/batches', 'denied'],
    ['POST', '/V1/Batches/', 'denied'],
    ['POST', '/v1/evals/eval_1/runs', 'denied'],
    ['POST', '/v1/fine_tuning/jobs', 'denied'],
    ['POST', '/v1/videos', 'denied'],
    ['POST', '/v1/videos/video_1/remix', 'denied'],
    ['POST', '/v1/batches/batch_1/cancel', null],
    ['GET', '/v1/batches', null],
    ['GET', '/v1/models', null],
    ['PUT', '/v1/responses', null],
    // Answers OpenAI stored, read back.
    ['GET', '/v1/responses/resp_1', 'stored:response'],
    ['GET', '/v1/responses/resp_1?stream=true&starting_after=3', 'stored:response'],
    ['GET', '/v1/chat/completions', 'stored:completions'],
    ['GET', '/v1/chat/completions/chatcmpl-1', 'stored:completion'],
    ['GET', '/v1/conversations/conv_1/items', 'stored:items'],
    ['GET', '/v1/conversations/conv_1/items/msg_1', 'stored:item'],
    ['GET', '/v1/responses/resp_1/input_items', null],
    // Routes around the proxy: ephemeral keys and realtime sessions, in any spelling.
    ['POST', '/v1/realtime/client_secrets', 'denied'],
    ['POST', '/v1/realtime/sessions', 'denied'],
    ['POST', '/v1/realtime/transcription_sessions', 'denied'],
    ['POST', '/v1/realtime/calls', 'denied'],
    ['POST', '/v1/realtime/calls/rtc_1/accept', 'denied'],
    ['POST', '/V1/Realtime/Client_Secrets', 'denied'],
    ['POST', '/v1/realtime%2Fclient_secrets', 'denied'],
    ['POST', '/v1/realtime/calls/rtc_1/hangup', null],
    ['GET', '/v1/realtime/client_secrets', null],
    // Spellings a lenient server may route to a stored answer are judged as one.
    ['GET', '/v1/responses%2Fresp_1', 'stored:response'],
    ['GET', '/V1/Responses/resp_1', 'stored:response'],
    ['GET', '/v1/chat%2fcompletions', 'stored:completions'],
    ['GET', '/v1/chat/completions%zz/x', null],
    ['GET', '/v1/responses', null],
    ['HEAD', '/v1/responses/resp_1', null],
    ['DELETE', '/v1/responses/resp_1', null],
    ['POST', '/v1/responses/resp_1', null],
  ]);
});

describe('Azure OpenAI routes', () => {
  check(createAzureOpenAiAdapter(deps), [
    ['POST', '/openai/deployments/gpt-4o-prod/chat/completions?api-version=2024-10-21', 'chat'],
    ['POST', '/openai/deployments/gpt-4o-prod/chat/completions/?api-version=2024-10-21', 'chat'],
    ['POST', '/openai/deployments/emb/embeddings?api-version=2024-10-21', 'embeddings'],
    ['POST', '/openai/deployments/inst/completions?api-version=2024-10-21', 'completions'],
    ['POST', '/openai/responses?api-version=2025-03-01-preview', 'responses'],
    ['POST', '/openai/v1/chat/completions', 'chat'],
    ['POST', '/openai/v1/responses', 'responses'],
    ['POST', '/openai/deployments/a/b/chat/completions', null],
    ['POST', '/evil/openai/deployments/d/chat/completions', null],
    ['POST', '/v1/chat/completions', null],
    ['POST', '/openai/deployments/d/extensions/chat/completions', null],
    ['GET', '/openai/deployments?api-version=2022-12-01', null],
    ['GET', '/openai/responses/resp_1?api-version=2025-04-01-preview', 'stored:response'],
    ['GET', '/openai/v1/responses/resp_1', 'stored:response'],
    ['GET', '/openai/v1/chat/completions/chatcmpl-1', 'stored:completion'],
    ['POST', '/openai/v1/realtime/client_secrets', 'denied'],
    ['POST', '/openai/realtimeapi/sessions?api-version=2025-04-01-preview', 'denied'],
    ['POST', '/openai/batches?api-version=2024-10-21', 'denied'],
    ['POST', '/openai/v1/batches', 'denied'],
    ['POST', '/openai/fine_tuning/jobs?api-version=2024-10-21', 'denied'],
  ]);

  it('names the deployment only on a deployment route', () => {
    expect(azureDeploymentFromPath('/openai/deployments/gpt%2D4o/chat/completions?api-version=1')).toBe('gpt-4o');
    expect(azureDeploymentFromPath('/openai/deployments/%E0%A4%A/chat/completions')).toBe('%E0%A4%A');
    expect(azureDeploymentFromPath('/x/openai/deployments/d/chat/completions')).toBeUndefined();
  });
});

describe('Anthropic routes', () => {
  check(createAnthropicAdapter(deps), [
    ['POST', '/v1/messages', 'messages'],
    ['POST', '/v1/messages/', 'messages'],
    ['POST', '/v1/messages?beta=true', 'messages'],
    ['POST', '/v1/messages/count_tokens', 'free'],
    ['POST', '/v1/messages/batches', 'denied'],
    ['POST', '/v1/messages%2Fbatches', 'denied'],
    ['POST', '/v1/messages/batches/msgbatch_1/cancel', null],
    ['POST', '/v1/complete', null],
    ['POST', '/evil/v1/messages', null],
    ['POST', '/v1/files/x/v1/messages', null],
    ['GET', '/v1/messages', null],
    ['GET', '/v1/models', null],
    ['GET', '/v1/messages/batches/msgbatch_1/results', 'stored:batch_results'],
    ['GET', '/v1/messages/batches%2Fmsgbatch_1/results', 'stored:batch_results'],
    ['GET', '/v1/messages/batches/msgbatch_1', null],
    ['GET', '/v1/messages/batches', null],
  ]);
});

describe('Gemini routes', () => {
  check(createGeminiAdapter(deps), [
    ['POST', '/v1beta/models/gemini-2.0-flash:generateContent', 'generate'],
    ['POST', '/v1/models/gemini-2.0-flash:generateContent', 'generate'],
    ['POST', '/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse', 'stream_generate'],
    ['POST', '/v1beta/models/gemini-embedding-001:embedContent', 'embed'],
    ['POST', '/v1beta/models/gemini-embedding-001:batchEmbedContents', 'batch_embed'],
    ['POST', '/v1beta/models/gemini-2.0-flash:countTokens', 'free'],
    ['POST', '/v1alpha/auth_tokens', 'denied'],
    ['POST', '/v1beta/auth_tokens', 'denied'],
    ['POST', '/v1beta/models/gemini-2.5-flash:batchGenerateContent', 'denied'],
    ['POST', '/v1/models/gemini-2.5-flash:batchGenerateContent', 'denied'],
    ['POST', '/v1beta/models/gemini-embedding-001:asyncBatchEmbedContent', 'denied'],
    ['POST', '/v1beta/models/veo-3.0-generate-001:predictLongRunning', 'denied'],
    ['POST', '/v1beta/tunedModels', 'denied'],
    ['POST', '/v1beta/cachedContents', 'denied'],
    ['POST', '/v1/cachedContents', 'denied'],
    // In any spelling a lenient server may route, capitals in the verb included.
    ['POST', '/V1BETA/Models/gemini-2.5-flash:BATCHGENERATECONTENT', 'denied'],
    ['POST', '/v1beta/models/veo-3.0-generate-001%3ApredictLongRunning', 'denied'],
    ['POST', '/v1beta/TUNEDMODELS', 'denied'],
    ['POST', '/v1beta/CachedContents', 'denied'],
    ['POST', '/v1beta/batches/b1:cancel', null],
    ['POST', '/evil/v1beta/models/gemini-2.0-flash:generateContent', null],
    ['POST', '/v1beta/files/x/models/gemini-2.0-flash:generateContent', null],
    ['POST', '/v1beta/models/a/b:generateContent', null],
    ['POST', '/v1beta/models/:generateContent', null],
    ['POST', '/v2/models/gemini-2.0-flash:generateContent', null],
    // The preview API version and tuned models generate as the others do.
    ['POST', '/v1alpha/models/gemini-2.5-pro:generateContent', 'generate'],
    ['POST', '/v1alpha/models/gemini-2.5-pro:streamGenerateContent?alt=sse', 'stream_generate'],
    ['POST', '/v1beta/tunedModels/mine:generateContent', 'generate'],
    ['POST', '/v1/tunedModels/mine:streamGenerateContent', 'stream_generate'],
    ['POST', '/v1alpha/models/gemini-2.5-flash:batchGenerateContent', 'denied'],
    ['POST', '/v1beta/tunedModels/mine:embedContent', null],
    ['GET', '/v1beta/models', null],
  ]);

  it('takes the model from the route only, as Google reads it', () => {
    expect(geminiModelFromPath('/v1beta/models/gemini-2.0-flash:generateContent?key=k')).toBe('gemini-2.0-flash');
    expect(geminiModelFromPath('/v1alpha/models/gemini%2D2.5-pro:generateContent')).toBe('gemini-2.5-pro');
    expect(geminiModelFromPath('/v1beta/tunedModels/mine:generateContent')).toBe('tunedModels/mine');
    expect(geminiModelFromPath('/evil/models/gemini-2.0-flash:generateContent')).toBeUndefined();
  });

  it('finds the model any other path names, in any spelling, for an unclassified call', () => {
    expect(geminiModelNamedIn('/V1BETA/Models/Gemini-2.5-Pro:GenerateContent')).toBe('gemini-2.5-pro');
    expect(geminiModelNamedIn('/v2/models/gemini%2D2.5-pro:generateContent')).toBe('gemini-2.5-pro');
    expect(geminiModelNamedIn('/v1beta/tunedModels/mine/operations')).toBe('tunedModels/mine');
    expect(geminiModelNamedIn('/v1beta/files/abc')).toBeUndefined();
    expect(azureDeploymentNamedIn('/OpenAI/Deployments/o1-pro/audio/speech')).toBe('o1-pro');
    expect(azureDeploymentNamedIn('/openai/files')).toBeUndefined();
  });
});

describe('OpenAI-compatible routes under configured base paths', () => {
  check(createOpenAiCompatibleAdapter(deps, { hosts: ['vllm:8000'] }), [
    ['POST', '/v1/chat/completions', 'chat'],
    ['POST', '/api/v1/chat/completions', null],
    ['POST', '/chat/completions', null],
  ]);
  check(createOpenAiCompatibleAdapter(deps, { hosts: ['gw:80'], basePaths: ['/api/v1/', ' v1', '', '/'] }), [
    ['POST', '/api/v1/chat/completions', 'chat'],
    ['POST', '/v1/embeddings', 'embeddings'],
    ['POST', '/chat/completions', 'chat'],
    ['POST', '/completions', 'completions'],
    ['POST', '/other/v1/chat/completions', null],
    ['POST', '/api/v2/chat/completions', null],
  ]);
  check(createOpenAiCompatibleAdapter(deps, { hosts: ['gw:80'], basePaths: ['/v1', ' '] }), [
    ['POST', '/v1/chat/completions', 'chat'],
    // A blank entry (a trailing comma in the configuration) does not open the root.
    ['POST', '/chat/completions', null],
  ]);

  it('normalizes base paths and request paths', () => {
    expect(['/v1', '/v1/', 'v1', ' /api/v1// ', '/', ''].map(normalizeBasePath)).toEqual([
      '/v1',
      '/v1',
      '/v1',
      '/api/v1',
      '',
      '',
    ]);
    expect(normalizeRoutePath('//v1///chat/completions//?a=/b')).toBe('/v1/chat/completions');
    expect(normalizeRoutePath('/')).toBe('/');
  });
});
