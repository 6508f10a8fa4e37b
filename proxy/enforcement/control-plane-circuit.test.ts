import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import type { RequestReply } from '../../core/bus/bus.ts';
import { SvcError } from '../../core/errors/index.ts';
import type { LeaseRequest } from '../../core/sync/contract.ts';
import { BudgetLease, type LeaseSettings } from './budget-lease.ts';
import { createControlPlaneCircuit } from './control-plane-circuit.ts';
import { svcCodeOf } from '../../test/harness/svc-code.ts';

/** A control plane that answers or times out as told, counting what actually reached it. */
function controlPlane(): RequestReply & { sent: number; down: boolean } {
  const cp = {
    sent: 0,
    down: false,
    request(_subject: string, data: unknown) {
      cp.sent++;
      if (cp.down) return Promise.reject(new SvcError('SVC-SYS-9001', 'no answer in time'));
      const req = data as LeaseRequest;
      return Promise.resolve({
        lease_id: 'L1',
        budget_id: req.budget_id,
        tokens: null,
        micros: req.want_micros,
        expires_at: new Date(Date.now() + 60_000).toISOString(),
        status: 'active',
      });
    },
    reply: () => Promise.reject(new Error('not used')),
  };
  return cp;
}

function rig() {
  let now = 1_000_000;
  const cp = controlPlane();
  const registry = new Registry();
  const circuit = createControlPlaneCircuit({ requests: cp, registry, now: () => now });
  const metric = async (name: string) =>
    (await registry.getSingleMetric(name)?.get())?.values.find((v) => v.labels.dependency === 'control_plane')?.value;
  return { cp, circuit, metric, advance: (ms: number) => (now += ms) };
}

const ask = (requests: RequestReply) =>
  requests.request('svc.t.leases.request', { budget_id: 'b', want_micros: 10 }, 100);

describe('the circuit in front of the control plane', () => {
  it('opens after 5 failures within 10 s, then fails fast without sending and counts it', async () => {
    const { cp, circuit, metric, advance } = rig();
    cp.down = true;
    for (let i = 0; i < 4; i++) {
      expect(await svcCodeOf(ask(circuit.requests))).toBe('SVC-SYS-9001');
      advance(2000);
    }
    expect(await metric('svc_proxy_circuit_state')).toBe(0);
    expect(await svcCodeOf(ask(circuit.requests))).toBe('SVC-SYS-9001');
    expect(cp.sent).toBe(5);
    expect(await metric('svc_proxy_circuit_state')).toBe(2);

    cp.down = false;
    expect(await svcCodeOf(ask(circuit.requests))).toBe('SVC-SYS-9001');
    expect(await svcCodeOf(ask(circuit.requests))).toBe('SVC-SYS-9001');
    expect(cp.sent).toBe(5);
    expect(await metric('svc_proxy_circuit_fast_failures_total')).toBe(2);
  });

  it('does not open on failures spread wider than the window', async () => {
    const { cp, circuit, metric, advance } = rig();
    cp.down = true;
    for (let i = 0; i < 8; i++) {
      await svcCodeOf(ask(circuit.requests));
      advance(2600);
    }
    expect(cp.sent).toBe(8);
    expect(await metric('svc_proxy_circuit_state')).toBe(0);
  });

  it('half-opens 30 s after opening, closes after 3 successes, and re-opens on a failed probe', async () => {
    const { cp, circuit, metric, advance } = rig();
    cp.down = true;
    for (let i = 0; i < 5; i++) await svcCodeOf(ask(circuit.requests));
    advance(29_999);
    expect(await metric('svc_proxy_circuit_state')).toBe(2);
    advance(1);
    expect(await metric('svc_proxy_circuit_state')).toBe(1);

    // A failed probe opens it again for another 30 s.
    expect(await svcCodeOf(ask(circuit.requests))).toBe('SVC-SYS-9001');
    expect(cp.sent).toBe(6);
    expect(await metric('svc_proxy_circuit_state')).toBe(2);
    advance(30_000);

    cp.down = false;
    for (let i = 0; i < 2; i++) expect(await svcCodeOf(ask(circuit.requests))).toBeNull();
    expect(await metric('svc_proxy_circuit_state')).toBe(1);
    expect(await svcCodeOf(ask(circuit.requests))).toBeNull();
    expect(await metric('svc_proxy_circuit_state')).toBe(0);
    expect(cp.sent).toBe(9);
    expect(await metric('svc_proxy_circuit_fast_failures_total')).toBe(0);
  });

  it('does not count a refusal from the control plane as a failure', async () => {
    const refusing: RequestReply = {
      request: () => Promise.reject(new SvcError('SVC-BUD-3002', 'budget not found')),
      reply: () => Promise.reject(new Error('not used')),
    };
    const guarded = createControlPlaneCircuit({ requests: refusing, registry: new Registry() });
    for (let i = 0; i < 10; i++) expect(await svcCodeOf(ask(guarded.requests))).toBe('SVC-BUD-3002');
    expect(guarded.breaker.state).toBe('CLOSED');
  });

  it('sends the budget lease onto its soft limit without a request while open', async () => {
    const { cp, circuit, advance } = rig();
    const PICO = 1_000_000;
    const settings: LeaseSettings = {
      tenantId: 't',
      holder: 'h',
      want: { tokens: 1000, pico: 1000 * PICO },
      softLimit: { tokens: 50, pico: 50 * PICO },
      renewBelow: 0.5,
      timeoutMs: 100,
    };
    const outcomes: string[] = [];
    cp.down = true;
    for (let i = 0; i < 5; i++) await svcCodeOf(ask(circuit.requests));
    advance(1000);
    const sentBefore = cp.sent;
    const lease = new BudgetLease('b', settings, circuit.requests, {
      outcome: (o) => outcomes.push(o),
      warn: () => undefined,
    });
    await lease.renew();
    expect(cp.sent).toBe(sentBefore);
    expect(lease.mode).toBe('soft');
    expect(lease.available()).toEqual({ tokens: 50, pico: 50 * PICO });
    expect(outcomes).toEqual(['unreachable']);
    await lease.release();
  });
});
