import { Counter, Gauge, type Registry } from 'prom-client';
import type { RequestReply } from '../../core/bus/bus.ts';
import {
  CircuitBreaker,
  type CircuitBreakerOptions,
  type CircuitState,
} from '../../core/resilience/circuit-breaker.ts';

/** Gauge values of `svc_proxy_circuit_state`: the order of recovery, so "higher is worse". */
export const CIRCUIT_STATE_VALUE: Record<CircuitState, number> = { CLOSED: 0, HALF_OPEN: 1, OPEN: 2 };

const DEPENDENCY = 'control_plane';

export interface ControlPlaneCircuit {
  /** The proxy's request-reply to the control plane, behind the breaker. */
  readonly requests: RequestReply;
  readonly breaker: CircuitBreaker;
}

export interface ControlPlaneCircuitDeps {
  requests: RequestReply;
  registry: Registry;
  /** Thresholds; spec 3.5 defaults when absent. */
  options?: Omit<CircuitBreakerOptions, 'name'>;
  now?: () => number;
  onStateChange?: (to: CircuitState, from: CircuitState) => void;
}

/**
 * Puts the spec 3.5 breaker in front of every request the proxy makes to the control plane
 * (lease grants, renewals, returns). While it is OPEN a request fails at once with SVC-SYS-9001
 * and is never sent, so callers take their fallback (the lease's soft limit) without waiting out
 * a timeout per call and without piling requests on a control plane that is struggling.
 * Replies are unaffected: the proxy answers nothing.
 */
export function createControlPlaneCircuit(deps: ControlPlaneCircuitDeps): ControlPlaneCircuit {
  const breaker = new CircuitBreaker(
    { name: 'control-plane', ...deps.options },
    {
      ...(deps.now !== undefined ? { now: deps.now } : {}),
      ...(deps.onStateChange !== undefined ? { onStateChange: deps.onStateChange } : {}),
    },
  );
  new Gauge({
    name: 'svc_proxy_circuit_state',
    help: 'Circuit breaker state per dependency: 0 closed, 1 half-open, 2 open',
    labelNames: ['dependency'],
    registers: [deps.registry],
    // Read at scrape time: an OPEN circuit turns HALF_OPEN by the clock, not by an event.
    collect() {
      this.set({ dependency: DEPENDENCY }, CIRCUIT_STATE_VALUE[breaker.state]);
    },
  });
  const fastFailures = new Counter({
    name: 'svc_proxy_circuit_fast_failures_total',
    help: 'Requests refused by an open (or saturated half-open) circuit without being sent',
    labelNames: ['dependency'],
    registers: [deps.registry],
  });
  fastFailures.inc({ dependency: DEPENDENCY }, 0);
  const inner = deps.requests;
  return {
    breaker,
    requests: {
      async request(subject, data, timeoutMs) {
        let sent = false;
        try {
          return await breaker.execute(() => {
            sent = true;
            return inner.request(subject, data, timeoutMs);
          });
        } catch (error) {
          if (!sent) fastFailures.inc({ dependency: DEPENDENCY });
          throw error;
        }
      },
      reply: (subject, handler) => inner.reply(subject, handler),
    },
  };
}
