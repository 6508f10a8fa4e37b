import type OpenAI from 'openai';
import type { ChatCompletionCreateParamsStreaming } from 'openai/resources/chat/completions';
import { expect } from 'vitest';
import { eventually } from '../harness/control-plane.ts';
import { failure } from '../harness/failure.ts';
import type { ProxyRig } from './harness.ts';

/**
 * Streams a chat answer and, once `after` pieces of its text arrived, terminates its envelope
 * through the control plane's API: what the stream then failed with, and how many pieces came.
 */
export async function terminatedMidStream(
  rig: ProxyRig,
  client: OpenAI,
  body: ChatCompletionCreateParamsStreaming,
  after = 3,
): Promise<{ error: unknown; received: number }> {
  const { data: stream, response } = await client.chat.completions.create(body).withResponse();
  const envelopeId = String(response.headers.get('x-svc-envelope-id'));
  let received = 0;
  const error = await failure(async () => {
    for await (const chunk of stream) {
      if (chunk.choices[0]?.delta.content && ++received === after) {
        await eventually(
          () => rig.envelope(envelopeId),
          (e) => e !== undefined,
        );
        const terminated = await rig.admin('POST', `/v1/envelopes/${envelopeId}/terminate`, {
          reason: 'operator stop',
        });
        expect(terminated.status).toBe(200);
      }
    }
  });
  return { error, received };
}
