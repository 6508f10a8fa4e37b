import type { CompiledRuleset, EvaluationResult } from '../../core/policy/index.ts';
import type { GateVerdict } from '../governance/policy-gate.ts';

/** `deny`: refused by a `network:connect` policy; `deny_port`: a port no rule opens. */
export type EgressDecision = 'allow' | 'deny' | 'deny_port';

export interface EgressRuleDeps {
  /** Evaluates `network:connect` for the destination against the local ruleset. */
  check(action: 'network:connect', context: { host: string; port: number }): Pick<GateVerdict, 'allowed' | 'result'>;
  /** Whether `host:port` is an intercepted (governed) destination. */
  intercepted(host: string, port: number): boolean;
  /** The ruleset `check` evaluated against, null when none is synced. */
  ruleset(): CompiledRuleset | null;
  /** Ports any host may be reached on (`proxy_egress_ports`). */
  allowedPorts: ReadonlySet<number>;
}

/**
 * The egress decision for a CONNECT or forward request, made on the name before anything is
 * dialled (the address is checked again when it is resolved): a `network:connect` DENY refuses;
 * otherwise the port must be an allowed one, the port of an intercepted destination, or opened
 * by an ALLOW rule written for the network (its action `network:…`), so that no rule at all
 * never opens an arbitrary port. A WARN (a monitored DENY, a logging rule) or an ALLOW of every
 * action (`*`, written to override denials of tools or models) opens none.
 */
export function createEgressCheck(deps: EgressRuleDeps): (host: string, port: number) => EgressDecision {
  return (host, port) => {
    const intercepted = deps.intercepted(host, port);
    // Without a ruleset a governed destination stays reachable: its calls are refused in the
    // provider's own format by the handler, which an agent's SDK reports better than a refused tunnel.
    const ruleset = deps.ruleset();
    if (ruleset === null && intercepted) return 'allow';
    const verdict = deps.check('network:connect', { host, port });
    if (!verdict.allowed) return 'deny';
    if (intercepted || deps.allowedPorts.has(port) || opensPorts(verdict.result)) return 'allow';
    return 'deny_port';
  };
}

function opensPorts(result: EvaluationResult | null | undefined): boolean {
  return result?.decision === 'ALLOW' && result.matched_action?.startsWith('network:') === true;
}

/** Parses `80,443` (config key proxy_egress_ports). */
export function parsePorts(value: string): Set<number> {
  return new Set(
    value
      .split(',')
      .map((p) => p.trim())
      .filter((p) => p !== '')
      .map(Number),
  );
}
