import { randomUUID } from 'node:crypto';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { openNatsMessaging } from '../../core/bus/nats-messaging.ts';
import { subjects } from '../../core/bus/subjects.ts';
import { eventually } from '../harness/control-plane.ts';
import { useFleet } from '../harness/fleet.ts';

/** Small batches: many of them in flight, one applied while the one before it commits. */
const fleet = useFleet({
  tenants: { drained: { max_tokens: 1_000_000_000 } },
  // What a killed process held comes back after the ack wait: short here, so the drain ends soon.
  controlPlaneEnv: { SVC_PROCESSOR_BATCH_SIZE: '50', SVC_NATS_ACK_WAIT_SECONDS: '3' },
});
const EVENTS = 12_000;
/** Events published twice (another msg id): the second copy must count nothing. */
const REPLAYED = 500;

async function usage(): Promise<{ llm_calls: number; tokens_input: number }> {
  const tenant = fleet.tenant('drained');
  const res = await fleet.cp.rest('GET', `/v1/budgets/${tenant.budgetId}/usage`, { tenant: tenant.tenantId });
  return res.body as { llm_calls: number; tokens_input: number };
}

describe('the control-plane process killed with SIGKILL while its event processor drains a backlog', () => {
  it('loses no acknowledged event and counts each event once, replays and redeliveries included', async () => {
    const { cp } = fleet;
    const tenant = fleet.tenant('drained');
    const publisher = await openNatsMessaging(
      { connection: { servers: fleet.nats.url, name: 'processor-kill' }, manage: false },
      pino({ level: 'silent' }),
    );
    const envelopes = Array.from({ length: 20 }, () => randomUUID());
    const events = Array.from({ length: EVENTS }, (_, i) => ({
      event_id: randomUUID(),
      tenant_id: tenant.tenantId,
      envelope_id: envelopes[i % envelopes.length]!,
      budget_id: tenant.budgetId,
      event_type: 'llm.call',
      timestamp: new Date().toISOString(),
      // Sizes differ, so that a lost or doubled event shows in the token total.
      tokens: { input: 1 + (i % 97), output: 0 },
      cost_usd: 0,
      source: 'proxy:pod-a',
    }));
    const copies = [
      ...events.map((data) => ({ data, msgId: data.event_id })),
      ...events.slice(0, REPLAYED).map((data) => ({ data, msgId: `replay-${data.event_id}` })),
    ];
    let next = 0;
    const publishSome = async (): Promise<void> => {
      while (next < copies.length) {
        const { data, msgId } = copies[next++]!;
        await publisher.bus.publish(subjects.event(tenant.tenantId, 'llm.call'), data, { msgId });
      }
    };
    // The backlog is published while the control plane is down, so that the kills cut its drain.
    await cp.kill();
    await Promise.all(Array.from({ length: 100 }, publishSome));
    await publisher.close();

    for (const share of [0.15, 0.4, 0.7]) {
      await cp.start();
      const reached = await eventually(usage, (u) => u.llm_calls >= EVENTS * share, 60_000);
      // Killed mid-drain: batches in flight, some applied and not yet acknowledged.
      await cp.kill();
      expect(reached.llm_calls).toBeLessThan(EVENTS);
    }
    await cp.start();

    const expectedTokens = events.reduce((sum, e) => sum + e.tokens.input, 0);
    // What was in flight at a kill comes back after the ack wait.
    const drained = await eventually(usage, (u) => u.llm_calls >= EVENTS, 90_000);
    await new Promise((r) => setTimeout(r, 500));
    expect(await usage()).toEqual(drained);
    expect({ calls: drained.llm_calls, tokens: drained.tokens_input }).toEqual({
      calls: EVENTS,
      tokens: expectedTokens,
    });
  }, 180_000);
});
