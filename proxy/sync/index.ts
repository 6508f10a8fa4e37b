export { RulesetSource, type RulesetOrigin, type RulesetSourceDeps } from './ruleset-source.ts';
export { listenForTerminations } from './terminate-listener.ts';
export { watchBudgetStates } from './budget-states.ts';
export { HoldStates, watchHoldStates } from './hold-states.ts';
export { BudgetWorkflows } from './budget-workflows.ts';
