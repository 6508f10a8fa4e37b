import { Counter, type Registry } from 'prom-client';
import type { BusLogger } from './bus.ts';
import { throttledWarn } from './throttled-warn.ts';

/** Which bound of the in-process bus made it discard a message: its count or its bytes. */
export type DiscardBound = 'max_messages' | 'max_bytes';

/**
 * Counts and logs the messages the in-process bus discards at its bounds before a subscriber
 * following them read them (a stalled durable): that subscriber will never see them. The log
 * line, at most one per consumer each 10 s, names the consumer and how many; never a payload.
 */
export class UnreadDiscards {
  readonly #logger: BusLogger;
  readonly #counter: Counter<'consumer' | 'bound'>;
  readonly #warnings = new Map<string, ReturnType<typeof throttledWarn>>();

  constructor(logger: BusLogger, registry?: Registry) {
    this.#logger = logger;
    this.#counter = new Counter({
      name: 'svc_bus_unread_discarded_total',
      help: 'Messages the in-process bus discarded at its bounds before a consumer following them read them, by consumer and bound',
      labelNames: ['consumer', 'bound'] as const,
      registers: registry === undefined ? [] : [registry],
    });
  }

  report(consumer: string, bound: DiscardBound, count: number): void {
    this.#counter.inc({ consumer, bound }, count);
    let warn = this.#warnings.get(consumer);
    if (warn === undefined) {
      warn = throttledWarn(this.#logger, 'bus messages discarded unread at the in-process bounds');
      this.#warnings.set(consumer, warn);
    }
    warn({ consumer, bound }, count);
  }
}
