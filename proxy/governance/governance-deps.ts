import type { Logger } from 'pino';
import type { PriceTable } from '../../core/metering/prices.ts';
import type { TokenCounter } from '../../core/metering/tokens.ts';
import type { LeaseBook } from '../enforcement/index.ts';
import type { EnvelopeRegistry } from '../envelopes/index.ts';
import type { PauseHolds } from '../holds/index.ts';
import type { GovernanceMetrics } from '../metrics/index.ts';
import type { BudgetWorkflows } from '../sync/index.ts';
import type { UpstreamClient } from '../upstream/index.ts';
import type { ActionHistory } from '../../core/brain/index.ts';
import type { AnomalyWatch } from './anomaly-watch.ts';
import type { EventRecorder } from './event-recorder.ts';
import type { PolicyGate } from './policy-gate.ts';

/** Everything the governed handlers share; built once in create-proxy.ts. */
export interface GovernanceDeps {
  /** The tenant this sidecar governs: every context's `tenant_id`. */
  tenantId: string;
  /** The workflow of each budget the sidecar charges: every context's `workflow_id`. */
  workflows: Pick<BudgetWorkflows, 'of'>;
  upstream: UpstreamClient;
  prices: PriceTable;
  gate: PolicyGate;
  /** The sidecar's recent tool calls and partial matches, for the sequence rules. */
  history: ActionHistory;
  /** The call rate and spend of each execution and of the sidecar (the Immune System's anomalies). */
  anomalies: AnomalyWatch;
  /** Holds the calls of the envelopes (or the sidecar) the Immune System paused until they are resumed. */
  pauses: Pick<PauseHolds, 'await' | 'holds'>;
  leases: LeaseBook;
  envelopes: EnvelopeRegistry;
  recorder: EventRecorder;
  metrics: GovernanceMetrics;
  logger: Pick<Logger, 'info' | 'warn' | 'debug' | 'error'>;
  tokens: TokenCounter;
  bodyLimitBytes: number;
  /** Largest upstream answer read whole to govern it, or drained without a client (`proxy_response_limit_bytes`). */
  responseLimitBytes: number;
  /** The largest stream event held while it completes. */
  eventLimitBytes: number;
  /** How long an answer is still read after its client left (`proxy_abort_drain_ms`). */
  abortDrainMs: number;
  /** How long a stream's body may stay open once its answer is complete (`proxy_stream_end_wait_ms`). */
  streamEndWaitMs: number;
  /** A path on a provider host that is none of its routes: metered by estimate, or refused. */
  unclassifiedPaths: 'meter' | 'refuse';
}
