/**
 * The event bus as both processes see it. Standalone mode runs an in-process implementation;
 * `SVC_NATS_URL` selects the NATS one. Both pass one contract suite (bus.contract.ts).
 *
 * Guarantees every implementation keeps:
 * - `publish` resolves only once the bus has durably accepted the message (JetStream ack,
 *   or the in-process log append); it rejects with SVC-EVT-4001 when it cannot.
 * - Messages with the same `msgId` are accepted once (de-duplication window).
 * - Delivery to a subscriber is ordered per subject.
 */
export interface BusMessage {
  subject: string;
  /** JSON-serialisable payload. */
  data: unknown;
  /** Idempotency key: a replay of the same id is dropped by the bus. */
  msgId: string;
  /** Delivery attempt, starting at 1; above 1 means a redelivery. */
  deliveryCount: number;
}

export interface Subscription {
  unsubscribe(): Promise<void>;
}

export interface Bus {
  publish(subject: string, data: unknown, options?: { msgId?: string }): Promise<void>;
  /**
   * Subscribe with a NATS-style pattern (`*` one token, `>` the rest). The handler's promise
   * acknowledges the message; a rejected handler leads to redelivery (durable buses) or is logged.
   */
  subscribe(pattern: string, handler: (message: BusMessage) => Promise<void>, options?: { durable?: string }): Promise<Subscription>;
  close(): Promise<void>;
  /** For /health: whether the bus is connected right now. */
  healthy(): boolean;
}
