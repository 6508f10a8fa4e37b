import type { Registry } from 'prom-client';
import { createHoldMetrics, type HoldMetrics } from './hold-metrics.ts';

/** How a call held for an approval ended. */
export type HoldOutcome = 'approved' | 'rejected' | 'timed_out' | 'full' | 'shutdown' | 'cancelled' | 'failed';

export type ApprovalMetrics = HoldMetrics;

export function createApprovalMetrics(registry: Registry): ApprovalMetrics {
  return createHoldMetrics(registry, 'approval', {
    held: 'Calls held now for an approval',
    holds: 'Calls a REQUIRE_APPROVAL decision held, by how the hold ended',
  });
}
