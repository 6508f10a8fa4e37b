import { afterAll, beforeAll } from 'vitest';
import { startProxyRig, type ProxyRig } from './harness.ts';

/** A chat completion offering the model two tools, `read_file` and `http_post` (the sequence tests). */
export const READ_AND_POST_REQUEST = {
  model: 'gpt-4o-mini',
  max_tokens: 5,
  messages: [{ role: 'user' as const, content: 'send the weekly report' }],
  tools: [
    { type: 'function' as const, function: { name: 'read_file', parameters: { type: 'object' } } },
    { type: 'function' as const, function: { name: 'http_post', parameters: { type: 'object' } } },
  ],
};

/**
 * A sidecar of its own for the describe this is called in, with one policy: the sequences'
 * history is the sidecar's, so a read in one describe must not count in another.
 */
export function sidecarWith(
  policy: Record<string, unknown>,
  config: Parameters<typeof startProxyRig>[0] = {},
): { readonly rig: ProxyRig } {
  const holder = {} as { rig: ProxyRig };
  beforeAll(async () => {
    holder.rig = await startProxyRig(config);
    await holder.rig.addPolicy(policy);
  });
  afterAll(async () => {
    await holder.rig.close();
  });
  return holder;
}
