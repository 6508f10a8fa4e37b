import { APIError } from 'openai';
import type { ProxyProcess } from '../harness/processes.ts';
import { openAiClient } from '../proxy/sdk-options.ts';

export interface ChatOutcome {
  status: number | undefined;
  code: string | null | undefined;
}

/**
 * One OpenAI SDK chat call to api.openai.com through a proxy process (HTTPS_PROXY semantics),
 * without SDK retries; a refusal is returned as its status and SVC code, not thrown.
 */
export async function chat(
  proxy: ProxyProcess,
  model: string,
  options: { maxTokens?: number; headers?: Record<string, string> } = {},
): Promise<ChatOutcome> {
  const agent = proxy.agent();
  try {
    await openAiClient(agent, options.headers).chat.completions.create(
      { model, max_tokens: options.maxTokens ?? 5, messages: [{ role: 'user', content: 'hi' }] },
      { maxRetries: 0 },
    );
    return { status: 200, code: null };
  } catch (error) {
    if (error instanceof APIError) return { status: error.status, code: error.code };
    throw error;
  } finally {
    await agent.close();
  }
}
