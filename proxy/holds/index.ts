export { HeldBytes, overHeldBytes } from './held-bytes.ts';
export { HeldCalls, type HoldEnding } from './held-calls.ts';
export { PauseHolds, type PauseHoldOptions, type PauseRefusal } from './pause-holds.ts';
