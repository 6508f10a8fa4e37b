export { estimate, price, type PricedUsage } from './call-pricing.ts';
export { EventRecorder, type EventSink, type UsageRecord } from './event-recorder.ts';
export { createGovernedHandler } from './governed-handler.ts';
export type { GovernanceDeps } from './governance-deps.ts';
export { PolicyGate, type GateVerdict, type PolicyFailMode } from './policy-gate.ts';
export { parseBounded } from './input-tokens.ts';
export { llmCallContext } from './llm-call/call-context.ts';
export { reserveCall } from './reserve-call.ts';
export { AnomalyWatch, movedPauseRecord, type AnomalyAction } from './anomaly-watch.ts';
