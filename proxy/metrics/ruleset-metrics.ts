import { Counter, Gauge, type Registry } from 'prom-client';

/** Why a ruleset snapshot was not installed. */
export type RulesetRejection = 'parse' | 'compile';

/** The ruleset in force, and the snapshots refused: otherwise a refused one leaves no trace. */
export interface RulesetMetrics {
  version: Gauge;
  rejected: Counter<'reason'>;
}

export function createRulesetMetrics(registry: Registry): RulesetMetrics {
  const registers = [registry];
  return {
    version: new Gauge({
      name: 'svc_proxy_ruleset_version',
      help: 'Version of the policy ruleset in force (0: none yet)',
      registers,
    }),
    rejected: new Counter({
      name: 'svc_proxy_ruleset_rejected_total',
      help: 'Ruleset snapshots refused, the last good ruleset kept, by reason (parse, compile)',
      labelNames: ['reason'],
      registers,
    }),
  };
}
