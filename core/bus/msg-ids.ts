/**
 * Msg ids of the event stream. Every tenant publishes into one stream, which keeps only the first
 * message with a given id within its duplicate window, so an id one publisher can choose must never
 * equal one another publisher uses. Each id is `<kind>:<tenant>:<rest>`: the kind says who made
 * it, and neither the kind nor a tenant id holds a `:`, so the kind and tenant of an id are read
 * back from it alone. A caller chooses its usage events' ids, and those only ever land after
 * `event:<its tenant>:`; that is the key storage de-duplicates usage events by (tenant and event
 * id), so the stream and the store count the same events once.
 */
export const msgIds = {
  /** A usage event, whoever recorded it (a REST caller, a proxy, the control plane). */
  event: (tenant: string, eventId: string) => `event:${tenant}:${eventId}`,
  /** The control plane's announcement that an envelope was created or moved to `status`. */
  envelope: (tenant: string, envelopeId: string, status: string) => `envelope:${tenant}:${envelopeId}:${status}`,
  /** A proxy opened an envelope it had not met. */
  proxyOpened: (tenant: string, envelopeId: string) => `proxy-opened:${tenant}:${envelopeId}`,
  /** A proxy ended an envelope (a budget cut-off, a TERMINATE policy). */
  proxyEnded: (tenant: string, envelopeId: string) => `proxy-ended:${tenant}:${envelopeId}`,
  /** A denial; `denialId` is new for each. */
  violation: (tenant: string, denialId: string) => `violation:${tenant}:${denialId}`,
  budgetDeleted: (tenant: string, budgetId: string) => `budget-deleted:${tenant}:${budgetId}`,
  /** A budget crossed an alert threshold: once per threshold and period. */
  budgetAlert: (tenant: string, budgetId: string, periodStart: string, percent: number) =>
    `budget-alert:${tenant}:${budgetId}:${periodStart}:${String(percent)}`,
  /** The Oracle expects a budget to run over: once per period. */
  overrunPredicted: (tenant: string, budgetId: string, periodStart: string) =>
    `overrun-predicted:${tenant}:${budgetId}:${periodStart}`,
  approval: (tenant: string, what: 'requested' | 'decided', approvalId: string) =>
    `approval-${what}:${tenant}:${approvalId}`,
} as const;
