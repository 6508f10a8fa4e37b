import { DiscardPolicy, RetentionPolicy, StorageType, nanos, type JetStreamManager, type StreamConfig } from 'nats';
import { z } from 'zod';
import type { BusLogger } from './bus.ts';
import { DEAD_LETTER_SUBJECTS, STREAM_SUBJECTS } from './subjects.ts';

/**
 * The limits a stream is created with when they are not set. On an existing stream an unset limit
 * never shrinks it (see `ensureLimits`): a larger value someone gave it stays.
 */
export const STREAM_DEFAULTS = { maxAgeMs: 7 * 24 * 3_600_000, maxBytes: 10 * 1024 ** 3, replicas: 1 } as const;
export const DEAD_LETTER_DEFAULTS = { maxAgeMs: 30 * 24 * 3_600_000, maxBytes: 1024 ** 3, replicas: 1 } as const;

const limitsSchema = {
  /** Oldest message kept. */
  maxAgeMs: z.number().int().positive().optional(),
  /** Size cap on disk; at the cap the discard policy decides. */
  maxBytes: z.number().int().positive().optional(),
  /** Copies on a NATS cluster. */
  replicas: z.number().int().min(1).max(5).optional(),
};

export const natsStreamOptionsSchema = z.object({
  name: z
    .string()
    .regex(/^[-_a-zA-Z0-9]+$/)
    .default('SVC_EVENTS'),
  ...limitsSchema,
  /**
   * At `maxBytes`: `old` drops the oldest events, processed or not; `new` refuses the publish
   * (SVC-EVT-4001, retryable), so the event stays in its publisher's outbox. With limits retention
   * the stream also keeps processed events, so `new` refuses whenever it is full: see docs/nats.md.
   */
  discard: z.enum(['old', 'new']).default('old'),
  /** How long a msgId is remembered for de-duplication (an outbox replay inside it is dropped). */
  duplicateWindowMs: z.number().int().positive().default(120_000),
});
export type NatsStreamOptions = z.input<typeof natsStreamOptionsSchema>;

type Stream = Partial<StreamConfig> & { name: string };
type Limit = 'max_age' | 'max_bytes' | 'num_replicas';
interface Limits {
  maxAgeMs?: number | undefined;
  maxBytes?: number | undefined;
  replicas?: number | undefined;
}

/** The stream's configuration, its limits as set or else their creation defaults. */
export function streamConfig(options: z.output<typeof natsStreamOptionsSchema>): Stream {
  return {
    name: options.name,
    subjects: [...STREAM_SUBJECTS],
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    discard: options.discard === 'new' ? DiscardPolicy.New : DiscardPolicy.Old,
    ...limitsOf(options, STREAM_DEFAULTS),
    duplicate_window: nanos(options.duplicateWindowMs),
  };
}

/** Creates the stream, or brings an existing one to the configured subjects and limits. */
export function ensureStream(
  jsm: JetStreamManager,
  options: z.output<typeof natsStreamOptionsSchema>,
  logger: BusLogger,
): Promise<void> {
  return ensure(jsm, streamConfig(options), options, logger);
}

export const deadLetterStreamOptionsSchema = z.object({
  /** Copy set-aside messages to the dead-letter stream; off, they are only counted and logged. */
  enabled: z.boolean().default(true),
  name: z
    .string()
    .regex(/^[-_a-zA-Z0-9]+$/)
    .default('SVC_DEAD_LETTERS'),
  /** Kept long enough for an operator to look, and bounded: a flood of bad messages cannot fill the disk. */
  ...limitsSchema,
});
export type DeadLetterStreamOptions = z.output<typeof deadLetterStreamOptionsSchema>;

/** Creates the dead-letter stream, or brings an existing one to the configured limits. */
export function ensureDeadLetterStream(
  jsm: JetStreamManager,
  options: DeadLetterStreamOptions,
  logger: BusLogger,
): Promise<void> {
  const config: Stream = {
    name: options.name,
    subjects: [DEAD_LETTER_SUBJECTS],
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    // Bad messages are kept for inspection only; a flood of them must not block the next ones.
    discard: DiscardPolicy.Old,
    ...limitsOf(options, DEAD_LETTER_DEFAULTS),
    // A message set aside twice (its term was lost) is kept once.
    duplicate_window: nanos(120_000),
  };
  return ensure(jsm, config, options, logger);
}

function limitsOf(options: Limits, defaults: Required<Limits>): Pick<StreamConfig, Limit> {
  return {
    max_age: nanos(options.maxAgeMs ?? defaults.maxAgeMs),
    max_bytes: options.maxBytes ?? defaults.maxBytes,
    num_replicas: options.replicas ?? defaults.replicas,
  };
}

/**
 * Adds the stream, or updates an existing one whose configuration differs (one that matches is
 * left untouched). A limit lower than the stream's current one discards retained messages (or
 * copies): it is applied only when set, with a warning naming both values; an unset limit keeps
 * the stream's larger value, so that a `nats stream edit` raising it survives a restart.
 */
async function ensure(jsm: JetStreamManager, config: Stream, set: Limits, logger: BusLogger): Promise<void> {
  const existing = await jsm.streams.info(config.name).catch(() => undefined);
  if (!existing) {
    await jsm.streams.add(config);
    return;
  }
  const current = existing.config;
  const wanted: Stream = { ...config };
  const explicit: Record<Limit, boolean> = {
    max_age: set.maxAgeMs !== undefined,
    max_bytes: set.maxBytes !== undefined,
    num_replicas: set.replicas !== undefined,
  };
  for (const limit of ['max_age', 'max_bytes', 'num_replicas'] as const) {
    const before = unlimitedAsInfinity(current[limit]);
    const after = wanted[limit] ?? before;
    if (after >= before) continue;
    if (explicit[limit]) {
      logger.warn(
        { stream: config.name, limit, old: current[limit], new: after },
        `stream ${config.name}: lowering ${limit} as configured; retained messages beyond it are discarded`,
      );
    } else {
      logger.warn(
        { stream: config.name, limit, old: current[limit], new: after },
        `stream ${config.name}: keeps its larger ${limit}; the default would discard retained messages (set the limit to lower it)`,
      );
      wanted[limit] = current[limit];
    }
  }
  const differs = (Object.keys(wanted) as Array<keyof Stream>).some(
    (key) => JSON.stringify(wanted[key]) !== JSON.stringify(current[key]),
  );
  if (differs) await jsm.streams.update(config.name, { ...current, ...wanted });
}

/** JetStream writes "no limit" as -1 (bytes) or 0 (age). */
function unlimitedAsInfinity(value: number): number {
  return value <= 0 ? Number.POSITIVE_INFINITY : value;
}
