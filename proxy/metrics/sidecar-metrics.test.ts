import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { SidecarState } from '../holds/index.ts';
import { createSidecarStateMetric } from './sidecar-metrics.ts';

describe('svc_proxy_sidecar_state', () => {
  it('reads 0 while the sidecar runs, 1 while it is paused, 2 once terminated', async () => {
    const registry = new Registry();
    const state = new SidecarState();
    createSidecarStateMetric(registry, () => state.current);
    const value = async () => (await registry.getSingleMetric('svc_proxy_sidecar_state')!.get()).values[0]?.value;
    expect(await value()).toBe(0);
    state.set({ state: 'paused', anchor: 'env-a', kind: 'call_rate', reason: 'why', ended: null });
    expect(await value()).toBe(1);
    state.set(null);
    expect(await value()).toBe(0);
    state.set({ state: 'terminated', reason: 'why' });
    expect(await value()).toBe(2);
  });
});
