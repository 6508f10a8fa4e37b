import { Counter, type Registry } from 'prom-client';
import { isSvcError } from '../errors/index.ts';
import type { BusLogger } from './bus.ts';

/** Why a message was set aside: its payload is not JSON, its consumer refused it, or handling it kept failing. */
export type PoisonReason = 'undecodable' | 'refused' | 'failed';

/** What is known of a message that was set aside; never its payload. */
export interface PoisonMessage {
  consumer: string;
  subject: string;
  /** Stream sequence on NATS, log position in process. */
  seq: number;
  msgId: string;
  reason: PoisonReason;
  detail: string;
}

/**
 * Counts and logs the messages a bus sets aside. The log line names the message (subject,
 * sequence, msg id) and why, never the payload: a payload may hold prompts or tool arguments.
 */
export class PoisonMessages {
  readonly #logger: BusLogger;
  readonly #counter: Counter<'consumer' | 'reason'>;

  constructor(logger: BusLogger, registry?: Registry) {
    this.#logger = logger;
    this.#counter = new Counter({
      name: 'svc_bus_poison_messages_total',
      help: 'Bus messages set aside (terminated and dead-lettered) instead of handled, by consumer and reason',
      labelNames: ['consumer', 'reason'] as const,
      registers: registry === undefined ? [] : [registry],
    });
  }

  report(message: PoisonMessage): void {
    this.#counter.inc({ consumer: message.consumer, reason: message.reason });
    this.#logger.error(
      {
        consumer: message.consumer,
        subject: message.subject,
        seq: message.seq,
        msg_id: message.msgId,
        reason: message.reason,
        detail: cleanDetail(message.detail),
      },
      'bus message set aside',
    );
  }
}

/**
 * A detail fit for a log field and a message header: printable, one line, bounded. Field paths
 * in a detail can come from the payload's keys, so they are not trusted to be either.
 */
export function cleanDetail(detail: string): string {
  const printable = detail.replace(/[^\x20-\x7e]/g, '?');
  return printable.length > 200 ? `${printable.slice(0, 200)}...` : printable;
}

/** A failure as a detail that carries no payload: the SVC code, or the error's class. */
export function failureDetail(error: unknown): string {
  if (isSvcError(error)) return error.code;
  return error instanceof Error ? error.name : typeof error;
}
