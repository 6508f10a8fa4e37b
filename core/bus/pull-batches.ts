import type { ConsumeCallback, Consumer, ConsumerMessages, FetchMessages, JsMsg } from 'nats';

export interface PullBatchOptions {
  /** Messages pulled, and the most one batch holds. */
  batchSize: number;
  /** How long a batch waits for more messages after its first. */
  maxWaitMs: number;
  /** How long the pull stays open. */
  expiresMs: number;
}

/**
 * Opens one pull, closed at once when `signal` aborts (the subscriber stops): the client then
 * unsubscribes its inbox, so what is handed back afterwards cannot come back into this pull.
 */
export async function openPull(
  consumer: Consumer,
  options: FetchMessages & Partial<ConsumeCallback>,
  signal: AbortSignal,
): Promise<ConsumerMessages> {
  const pulled = await consumer.fetch(options);
  const close = (): void => void pulled.close();
  if (signal.aborted) close();
  else {
    signal.addEventListener('abort', close, { once: true });
    void pulled.closed().then(() => signal.removeEventListener('abort', close));
  }
  return pulled;
}

/**
 * Pulls up to `batchSize` messages once and hands them over in batches, in order: a batch is cut
 * when full or `maxWaitMs` after its first message, and the next is handed over only once
 * `handOver` has settled for the one before. The client hands each message to a callback as it
 * parses it: iterating the pull instead cost a few promises per message (the client's async
 * generator, and a race against the batch's timer). Ends when the pull has ended and every batch
 * was handed over; a pull that failed (the consumer deleted, the connection lost) then throws.
 * `signal` closes the pull (`openPull`); what it brought is still handed over.
 */
export async function pullBatches(
  consumer: Consumer,
  options: PullBatchOptions,
  signal: AbortSignal,
  handOver: (batch: JsMsg[]) => Promise<void>,
): Promise<void> {
  const ready: JsMsg[][] = [];
  let filling: JsMsg[] = [];
  let timer: NodeJS.Timeout | undefined;
  let wake = Promise.withResolvers<void>();
  const cut = (): void => {
    clearTimeout(timer);
    timer = undefined;
    if (filling.length === 0) return;
    ready.push(filling);
    filling = [];
    wake.resolve();
  };
  // The client takes a callback on a fetch as on `consume`, though its type names it for `consume` only.
  const fetch: FetchMessages & ConsumeCallback = {
    max_messages: options.batchSize,
    expires: options.expiresMs,
    callback: (msg) => {
      filling.push(msg);
      if (filling.length >= options.batchSize) cut();
      else if (filling.length === 1) timer = setTimeout(cut, options.maxWaitMs);
    },
  };
  const pulled = await openPull(consumer, fetch, signal);
  let ended: { error: Error | void } | undefined;
  void pulled.closed().then((error) => {
    cut();
    ended = { error };
    wake.resolve();
  });
  for (;;) {
    await wake.promise;
    wake = Promise.withResolvers<void>();
    for (let batch = ready.shift(); batch !== undefined; batch = ready.shift()) await handOver(batch);
    if (ended !== undefined && ready.length === 0) {
      if (ended.error) throw ended.error;
      return;
    }
  }
}
