export {
  createGovernanceMetrics,
  type CutoffReason,
  type GovernanceMetrics,
  type UsageDirection,
} from './governance-metrics.ts';
export { createModelLabels, OTHER_MODEL, type ModelLabels } from './model-labels.ts';
