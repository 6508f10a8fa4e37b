export {
  createGovernanceMetrics,
  type CutoffReason,
  type GovernanceMetrics,
  type UsageDirection,
} from './governance-metrics.ts';
export { createModelLabels, OTHER_MODEL, type ModelLabels } from './model-labels.ts';
export { createApprovalMetrics, type ApprovalMetrics, type HoldOutcome } from './approval-metrics.ts';
export { createPauseMetrics, type PauseMetrics, type PauseHoldOutcome } from './pause-metrics.ts';
export { createRulesetMetrics, type RulesetMetrics, type RulesetRejection } from './ruleset-metrics.ts';
export { createSidecarStateMetric } from './sidecar-metrics.ts';
