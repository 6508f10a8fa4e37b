import type { GateVerdict } from '../governance/policy-gate.ts';

/** `deny`: refused by a `network:connect` policy; `deny_port`: a port no rule opens. */
export type EgressDecision = 'allow' | 'deny' | 'deny_port';

export interface EgressRuleDeps {
  /** Evaluates `network:connect` for the destination against the local ruleset. */
  check(action: 'network:connect', context: { host: string; port: number }): Pick<GateVerdict, 'allowed' | 'result'>;
  /** Whether `host:port` is an intercepted (governed) destination. */
  intercepted(host: string, port: number): boolean;
  hasRuleset(): boolean;
  /** Ports any host may be reached on (`proxy_egress_ports`). */
  allowedPorts: ReadonlySet<number>;
}

/**
 * The egress decision for a CONNECT or forward request, made on the name before anything is
 * dialled (the address is checked again when it is resolved): a `network:connect` DENY refuses;
 * otherwise the port must be an allowed one, the port of an intercepted destination, or opened
 * by an explicit `network:connect` ALLOW, so that no rule at all never opens an arbitrary port.
 */
export function createEgressCheck(deps: EgressRuleDeps): (host: string, port: number) => EgressDecision {
  return (host, port) => {
    const intercepted = deps.intercepted(host, port);
    // Without a ruleset a governed destination stays reachable: its calls are refused in the
    // provider's own format by the handler, which an agent's SDK reports better than a refused tunnel.
    if (!deps.hasRuleset() && intercepted) return 'allow';
    const verdict = deps.check('network:connect', { host, port });
    if (!verdict.allowed) return 'deny';
    if (intercepted || deps.allowedPorts.has(port) || verdict.result?.effect === 'allow') return 'allow';
    return 'deny_port';
  };
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
