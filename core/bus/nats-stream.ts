import { DiscardPolicy, RetentionPolicy, StorageType, nanos, type JetStreamManager, type StreamConfig } from 'nats';
import { z } from 'zod';
import { DEAD_LETTER_SUBJECTS, STREAM_SUBJECTS } from './subjects.ts';

export const natsStreamOptionsSchema = z.object({
  name: z
    .string()
    .regex(/^[-_a-zA-Z0-9]+$/)
    .default('SVC_EVENTS'),
  /** Oldest event kept; the event processor is expected to be far less behind than this. */
  maxAgeMs: z
    .number()
    .int()
    .positive()
    .default(7 * 24 * 3_600_000),
  /** Size cap of the stream on disk; at the cap the oldest events go (limits retention). */
  maxBytes: z
    .number()
    .int()
    .positive()
    .default(10 * 1024 ** 3),
  /** How long a msgId is remembered for de-duplication (an outbox replay inside it is dropped). */
  duplicateWindowMs: z.number().int().positive().default(120_000),
  replicas: z.number().int().min(1).max(5).default(1),
});
export type NatsStreamOptions = z.input<typeof natsStreamOptionsSchema>;

export function streamConfig(
  options: z.output<typeof natsStreamOptionsSchema>,
): Partial<StreamConfig> & { name: string } {
  return {
    name: options.name,
    subjects: [...STREAM_SUBJECTS],
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    discard: DiscardPolicy.Old,
    max_age: nanos(options.maxAgeMs),
    max_bytes: options.maxBytes,
    duplicate_window: nanos(options.duplicateWindowMs),
    num_replicas: options.replicas,
  };
}

/** Creates the stream, or brings an existing one to the configured limits and subjects. */
export async function ensureStream(
  jsm: JetStreamManager,
  options: z.output<typeof natsStreamOptionsSchema>,
): Promise<void> {
  const config = streamConfig(options);
  const existing = await jsm.streams.info(config.name).catch(() => undefined);
  if (existing) await jsm.streams.update(config.name, { ...existing.config, ...config });
  else await jsm.streams.add(config);
}

export const deadLetterStreamOptionsSchema = z.object({
  /** Copy set-aside messages to the dead-letter stream; off, they are only counted and logged. */
  enabled: z.boolean().default(true),
  name: z
    .string()
    .regex(/^[-_a-zA-Z0-9]+$/)
    .default('SVC_DEAD_LETTERS'),
  /** Kept long enough for an operator to look, and bounded: a flood of bad messages cannot fill the disk. */
  maxAgeMs: z
    .number()
    .int()
    .positive()
    .default(30 * 24 * 3_600_000),
  maxBytes: z
    .number()
    .int()
    .positive()
    .default(1024 ** 3),
});
export type DeadLetterStreamOptions = z.output<typeof deadLetterStreamOptionsSchema>;

/** Creates the dead-letter stream, or brings an existing one to the configured limits. */
export async function ensureDeadLetterStream(jsm: JetStreamManager, options: DeadLetterStreamOptions): Promise<void> {
  const config: Partial<StreamConfig> & { name: string } = {
    name: options.name,
    subjects: [DEAD_LETTER_SUBJECTS],
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    discard: DiscardPolicy.Old,
    max_age: nanos(options.maxAgeMs),
    max_bytes: options.maxBytes,
    // A message set aside twice (its term was lost) is kept once.
    duplicate_window: nanos(120_000),
  };
  const existing = await jsm.streams.info(config.name).catch(() => undefined);
  if (existing) await jsm.streams.update(config.name, { ...existing.config, ...config });
  else await jsm.streams.add(config);
}
