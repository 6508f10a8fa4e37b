import { startProxyRig, type ProxyRig } from './harness.ts';
import { openAiClient } from './sdk-options.ts';

/** A proxy rig whose one policy refuses an LLM call of more than `limit` input tokens. */
export async function startTokenLimitRig(limit: number): Promise<ProxyRig> {
  const rig = await startProxyRig({});
  await rig.addPolicy({
    name: 'input-token-limit',
    priority: 500,
    rules: [
      {
        action: 'llm:*',
        effect: 'deny',
        conditions: [{ field: 'estimated_input_tokens', operator: 'gt', value: limit }],
      },
    ],
  });
  return rig;
}

/** One chat call of one user message through the rig's proxy. */
export const askChat = (rig: ProxyRig, execution: string, content: string) =>
  openAiClient(rig.agent, { 'X-Svc-Execution-Id': execution }).chat.completions.create({
    model: 'gpt-4o-mini',
    max_tokens: 2,
    messages: [{ role: 'user', content }],
  });
