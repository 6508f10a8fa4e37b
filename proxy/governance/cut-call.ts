import type { CutoffReason } from '../metrics/index.ts';
import type { GovernanceDeps } from './governance-deps.ts';
import { holdCharge, type Charge, type ChargedCall } from './settle-call.ts';
import type { UpstreamSignal } from './upstream-signal.ts';

/**
 * Cuts a call's answer while the provider may still be generating it: counted by why, and, cut
 * because its budget could not cover it, its envelope ends BUDGET_EXCEEDED. The provider bills
 * what it generates whether or not anyone reads it, so the rest is drained for what it used (from
 * now, within `proxy_abort_drain_ms`, and within `proxy_response_limit_bytes`); meanwhile `worst`,
 * the call's worst case, stands for it provisionally (`holdCharge`), so that a process ending
 * before the drain does leaves the call charged. `end` ends the agent's answer once that is
 * written, so that an agent that saw the cut never finds the call uncharged after a kill: on the
 * default store the write is a synchronous commit and `end` runs in this same turn of the loop;
 * with a flush per commit (`proxy_fsync_interval_ms` 0) it runs once the commit is on disk
 * (docs/performance.md, "A cut answer's end"). The caller charges the call once the drain ends,
 * which replaces it.
 */
export function cutCall(
  deps: GovernanceDeps,
  call: ChargedCall,
  upstream: UpstreamSignal,
  reason: CutoffReason,
  message: string,
  worst: Charge,
  end: () => void,
): void {
  upstream.drain();
  deps.metrics.cutoffs.inc({ provider: call.provider, reason });
  if (
    reason === 'budget' &&
    deps.envelopes.end(call.envelope.envelopeId, { status: 'BUDGET_EXCEEDED', reason: message })
  )
    void deps.recorder.ended(call.envelope, 'BUDGET_EXCEEDED', message);
  void holdCharge(deps, call, worst).then(end);
}
