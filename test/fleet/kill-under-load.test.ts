import { describe, expect, it } from 'vitest';
import { request, type ProxyAgent } from 'undici';
import { eventually } from '../harness/control-plane.ts';
import { useFleet } from '../harness/fleet.ts';
import type { FleetTenant, ProxyProcess } from '../harness/processes.ts';

const fleet = useFleet({ tenants: { crash: { max_cost_usd: 1000, max_tokens: 100_000_000 } } });
/** Kills of the proxy during the run, each at a random moment of steady load. */
const KILLS = 4;
const AGENTS = 6;

/**
 * One call through the proxy, named by its request id. True only when the agent read the whole
 * answer: a 200, the body to its end, and (for a stream) the final `[DONE]` event.
 */
async function call(agent: ProxyAgent, id: string, stream: boolean): Promise<boolean> {
  try {
    const res = await request('https://api.openai.com/v1/chat/completions', {
      method: 'POST',
      dispatcher: agent,
      headers: { 'content-type': 'application/json', authorization: 'Bearer sk-test-key', 'x-request-id': id },
      body: JSON.stringify({ model: 'gpt-4o-mini', max_tokens: 8, stream, messages: [{ role: 'user', content: id }] }),
    });
    const text = await res.body.text();
    if (res.statusCode !== 200) return false;
    if (stream) return text.includes('data: [DONE]');
    return (JSON.parse(text) as { usage?: unknown }).usage !== undefined;
  } catch {
    // Cut by the kill: the agent did not receive this answer in full.
    return false;
  }
}

async function recordedRequestIds(tenant: FleetTenant): Promise<string[]> {
  const res = await fleet.cp.rest('GET', '/v1/events?event_type=llm.call&limit=1000', { tenant: tenant.tenantId });
  expect(res.status).toBe(200);
  return (res.body as { payload: { request_id: string } }[]).map((e) => e.payload.request_id);
}

describe('the proxy process killed with SIGKILL at random moments under load', () => {
  it('every call whose answer the agent received in full is recorded once; none is recorded twice', async () => {
    const tenant = fleet.tenant('crash');
    const proxy: ProxyProcess = await fleet.proxy(tenant);
    await proxy.start();
    const received: string[] = [];
    let running = true;
    let agent = proxy.agent();
    const loop = async (n: number) => {
      for (let i = 0; running; i++) {
        const id = `kill-${n}-${i}`;
        if (await call(agent, id, i % 2 === 0)) received.push(id);
        // While the proxy is down or starting, calls fail at once: pace them instead of spinning.
        else await new Promise((r) => setTimeout(r, 100));
      }
    };
    const agents = Array.from({ length: AGENTS }, (_, n) => loop(n));
    for (let k = 0; k < KILLS; k++) {
      const before = received.length;
      await eventually(
        () => received.length,
        (r) => r >= before + 20,
        60_000,
      );
      // A random moment within steady load.
      await new Promise((r) => setTimeout(r, Math.random() * 300));
      await proxy.kill();
      const old = agent;
      agent = proxy.agent();
      void old.destroy();
      await proxy.start();
    }
    const before = received.length;
    await eventually(
      () => received.length,
      (r) => r >= before + 20,
      60_000,
    );
    running = false;
    await Promise.all(agents);
    await agent.close();
    // Every call that reached the provider may be on record: all of them fit in one events page.
    expect(fleet.sim.requests.length).toBeLessThan(1000);
    expect(received.length).toBeGreaterThanOrEqual(100);

    // The restarted proxy's outbox delivers what the killed ones committed.
    const want = new Set(received);
    const allThere = (ids: string[]) => [...want].every((id) => ids.includes(id));
    await eventually(
      async () => {
        // Polled gently: the control plane's REST rate limit counts these reads.
        await new Promise((r) => setTimeout(r, 250));
        return recordedRequestIds(tenant);
      },
      allThere,
      60_000,
    ).catch(() => undefined);
    // A moment more, so that a late duplicate would have been stored too.
    await new Promise((r) => setTimeout(r, 500));
    const settled = await recordedRequestIds(tenant);
    const counts = new Map<string, number>();
    for (const id of settled) counts.set(id, (counts.get(id) ?? 0) + 1);
    expect([...counts].filter(([, n]) => n > 1)).toEqual([]);
    expect([...want].filter((id) => !counts.has(id))).toEqual([]);
  }, 240_000);
});
