import type { Logger } from 'pino';
import type { PriceTable } from '../../core/metering/prices.ts';
import type { LeaseBook } from '../enforcement/index.ts';
import type { EnvelopeRegistry } from '../envelopes/index.ts';
import type { GovernanceMetrics } from '../metrics/index.ts';
import type { UpstreamClient } from '../upstream/index.ts';
import type { EventRecorder } from './event-recorder.ts';
import type { PolicyGate } from './policy-gate.ts';

/** Everything the governed handlers share; built once in create-proxy.ts. */
export interface GovernanceDeps {
  upstream: UpstreamClient;
  prices: PriceTable;
  gate: PolicyGate;
  leases: LeaseBook;
  envelopes: EnvelopeRegistry;
  recorder: EventRecorder;
  metrics: GovernanceMetrics;
  logger: Pick<Logger, 'info' | 'warn' | 'debug' | 'error'>;
  bodyLimitBytes: number;
  /** The largest upstream answer read whole to govern it (an MCP tools list). */
  responseLimitBytes: number;
  /** The largest stream event held while it completes. */
  eventLimitBytes: number;
}
