import type { Registry } from 'prom-client';
import { createHoldMetrics, type HoldMetrics } from './hold-metrics.ts';

/** How a call held for its paused envelope ended. */
export type PauseHoldOutcome = 'resumed' | 'timed_out' | 'full' | 'shutdown' | 'cancelled';

export type PauseMetrics = HoldMetrics;

export function createPauseMetrics(registry: Registry): PauseMetrics {
  return createHoldMetrics(registry, 'pause', {
    held: 'Calls held now because their envelope is paused',
    holds: 'Calls of a paused envelope held, by how the hold ended',
  });
}
