import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProxyRig, type ProxyRig } from './harness.ts';
import { openAiClient } from './sdk-options.ts';

let rig: ProxyRig;

beforeAll(async () => {
  rig = await startProxyRig();
  await rig.addPolicy({ name: 'no-deletes', rules: [{ action: 'tool:delete_repo', effect: 'deny' }], priority: 400 });
});
afterAll(async () => {
  await rig.close();
});

/** The `model` labels of svc_proxy_requests_total with decision `allowed`. */
async function allowedModels(): Promise<string[]> {
  const metric = (await rig.proxy.registry.getMetricsAsJSON()).find((m) => m.name === 'svc_proxy_requests_total');
  return (metric?.values ?? [])
    .filter((v) => v.labels.decision === 'allowed')
    .map((v) => String(v.labels.model))
    .sort();
}

describe('model labels of the governed metrics', () => {
  it('keeps made-up model names the provider refuses from taking the label slots of real models', async () => {
    // The provider refuses each made-up name (404), as it does a model it does not have.
    const refusing = openAiClient(rig.agent, { 'x-sim-error-code': 'SVC-SYS-9006' });
    for (let i = 0; i < 60; i += 1) {
      const refused = await refusing.chat.completions
        .create({ model: `made-up-model-${i}`, max_tokens: 4, messages: [{ role: 'user', content: 'hi' }] })
        .catch((error: unknown) => error);
      expect(refused).toMatchObject({ status: 404 });
    }
    const client = openAiClient(rig.agent);
    // Listed in the price table, and a snapshot name only the provider's answer vouches for.
    for (const model of ['gpt-4o-mini', 'gpt-4o-mini-2024-07-18']) {
      await client.chat.completions.create({ model, max_tokens: 4, messages: [{ role: 'user', content: 'hi' }] });
    }
    expect(await allowedModels()).toEqual(['gpt-4o-mini', 'gpt-4o-mini-2024-07-18', 'other']);
  });
});
