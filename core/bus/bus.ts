/**
 * The event bus as both processes see it. Standalone mode runs an in-process implementation;
 * `SVC_NATS_URL` selects the NATS one. Both pass one contract suite (test/bus/bus.contract.ts).
 *
 * Guarantees every implementation keeps:
 * - `publish` resolves only once the bus has durably accepted the message (JetStream ack,
 *   or the in-process log append); it rejects with SVC-EVT-4001 when it cannot.
 * - Messages with the same `msgId` are accepted once (de-duplication window).
 * - Delivery to a subscriber is ordered per subject.
 * - A handler that rejects gets the message again (bounded attempts, with backoff); a subscriber
 *   does not move past a message it has not acknowledged.
 * - One bad message never holds up the others: a message whose payload does not decode, that its
 *   handler refuses (`SetAside`), or whose handler keeps failing is set aside alone (terminated,
 *   counted in `svc_bus_poison_messages_total`, logged without its payload, and on NATS copied to
 *   the dead-letter stream), and the subscriber goes on.
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

/** A message its consumer can never use (it does not validate): the bus sets it aside, see above. */
export interface SetAside {
  message: BusMessage;
  /** Why, without the payload: field paths and codes, never values. */
  reason: string;
}

export interface BatchOptions {
  /** Most messages handed to the handler at once. */
  batchSize: number;
  /** How long to wait for a batch to fill before handing over what arrived. */
  maxWaitMs: number;
}

export type BatchHandler = (messages: BusMessage[], applied: () => void) => Promise<readonly SetAside[] | void>;

export interface PublishOptions {
  msgId?: string;
  /** `data` as JSON text, where the publisher holds it already (the outbox does): sent as it is. */
  json?: string | undefined;
}

export interface Bus {
  publish(subject: string, data: unknown, options?: PublishOptions): Promise<void>;
  /**
   * Subscribe with a NATS-style pattern (`*` one token, `>` the rest). The handler's promise
   * acknowledges the message; a rejected handler leads to redelivery.
   * With `durable`, the position survives unsubscribe and a new durable starts at the oldest
   * retained message; without it, delivery starts with messages published after subscribing.
   */
  subscribe(
    pattern: string,
    handler: (message: BusMessage) => Promise<void>,
    options?: { durable?: string },
  ): Promise<Subscription>;
  /**
   * Durable batch consumption: the handler gets up to `batchSize` messages in order, and the batch
   * is acknowledged only after it resolved; the messages it returns are set aside instead. A
   * rejected batch is handed over again one message at a time, in order, each with the retry
   * policy of `subscribe`, so a message that fails alone is set aside alone.
   * A handler may call `applied` once the batch's changes are ordered behind the previous batch's
   * (its storage transaction has ended, its commit is under way): the next batch is then handed
   * over while this one's promise is pending, and each batch is acknowledged when its own promise
   * resolves. Without that call, a batch is handed over once the one before it is done.
   */
  consumeBatches(pattern: string, durable: string, options: BatchOptions, handler: BatchHandler): Promise<Subscription>;
  close(): Promise<void>;
  /** For /health: whether the bus is connected right now. */
  healthy(): boolean;
  /**
   * How long after its publication a message may be handed to a consumer again, in ms; null
   * without limit. A durable made anew starts at the oldest message kept, so on JetStream this is
   * the event stream's max age as the server has it (which may exceed the one configured). The
   * in-memory bus keeps its messages and durables for the life of the process only, and a durable
   * that took a message is never handed it again: 0.
   */
  redeliverableForMs(): Promise<number | null>;
}

/** One key of a key-value bucket; `value` is undefined when the key was deleted. */
export interface KeyValueEntry {
  key: string;
  value: unknown;
  revision: number;
  operation: 'PUT' | 'DEL';
}

/**
 * The last value per key (history 1). Keys are `.`-separated tokens of letters, digits, `-`, `_`
 * and `=` (no `:` or spaces), so that a watch filter like `ruleset.<tenant>.>` selects them.
 */
export interface KeyValueStore {
  get(key: string): Promise<KeyValueEntry | undefined>;
  /** Returns the revision the value was stored under. */
  put(key: string, value: unknown): Promise<number>;
  /**
   * Compare and set: stores the value only while the key is still at `revision` (null: while it
   * has no value). The new revision, or null when another writer moved the key meanwhile.
   */
  putIf(key: string, value: unknown, revision: number | null): Promise<number | null>;
  delete(key: string): Promise<void>;
  /**
   * Delivers the current value of every key matching `filter` first, then the changes, in revision
   * order. Resolves once the current values have been delivered, so a caller is up to date at once.
   * With history 1 a value replaced before the watch sent it may never be delivered: what a watch
   * guarantees is order and that the last entry it delivered for a key is the key's current state.
   */
  watch(filter: string, callback: (entry: KeyValueEntry) => void | Promise<void>): Promise<Subscription>;
}

export interface KeyValueOptions {
  /**
   * Values older than this are removed (never announced to watches), so the bucket stays bounded.
   * Applied by a writer that creates buckets; an existing bucket with another age is changed to it.
   */
  maxAgeMs?: number;
}

export interface KeyValueStores {
  /** Opens the bucket, creating it when it does not exist. */
  open(bucket: string, options?: KeyValueOptions): Promise<KeyValueStore>;
}

/**
 * Request-reply over plain subjects (budget leases). A handler's result is the reply; a handler
 * that throws an SvcError makes `request` reject with that same code. No responder or no
 * answer within `timeoutMs` rejects with SVC-SYS-9001.
 */
export interface RequestReply {
  request(subject: string, data: unknown, timeoutMs: number): Promise<unknown>;
  /** `subject` may be a pattern (`svc.*.leases.request`); the handler gets the concrete subject. */
  reply(subject: string, handler: (data: unknown, subject: string) => Promise<unknown>): Promise<Subscription>;
}

/** Fire-and-forget signals (envelope terminate): not stored, delivered to whoever listens now. */
export interface Signals {
  publishSignal(subject: string, data: unknown): Promise<void>;
  subscribeSignals(
    pattern: string,
    handler: (data: unknown, subject: string) => void | Promise<void>,
    options?: SignalOptions,
  ): Promise<Subscription>;
}

export interface SignalOptions {
  /**
   * Told of each signal dropped because the subscription's handlers were all busy (`REPLY_LIMITS`),
   * for a subscriber whose losses are worth a metric rather than the throttled warning alone.
   */
  dropped?: () => void;
}

/** Everything a process needs from messaging, from one connection. */
export interface Messaging {
  bus: Bus;
  keyValue: KeyValueStores;
  requests: RequestReply;
  signals: Signals;
  healthy(): boolean;
  close(): Promise<void>;
}

/** Where a failure in delivery goes when nobody is waiting for it. */
export interface BusLogger {
  warn(object: Record<string, unknown>, message: string): void;
  error(object: Record<string, unknown>, message: string): void;
}
