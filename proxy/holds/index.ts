export { HeldBytes, overHeldBytes } from './held-bytes.ts';
export { HeldCalls, type HoldEnding } from './held-calls.ts';
export { PauseHolds, type PauseHoldOptions, type PauseRefusal, type SidecarPause } from './pause-holds.ts';
export { keptSidecarState, SidecarState, type SidecarHold } from './sidecar-state.ts';
