import { pino, type Logger } from 'pino';
import { createScrubber } from './redact.ts';

export interface LoggerOptions {
  level: string;
  service: string;
  /** The process's configured secrets (`configuredSecrets(config)`), removed wherever they appear. */
  secrets?: Iterable<string | undefined>;
  /** Where lines go; stdout when absent. */
  destination?: pino.DestinationStream;
}

/**
 * pino JSON logs for one process; request-scoped children add `request_id`. Every argument of
 * every call, and every finished line, pass through one scrubber, so no call site has to remember
 * which of its fields might hold a credential.
 */
export function createLogger(options: LoggerOptions): Logger {
  const scrub = createScrubber(options.secrets);
  const settings: pino.LoggerOptions = {
    level: options.level,
    base: { service: options.service },
    timestamp: pino.stdTimeFunctions.isoTime,
    hooks: {
      // Fields by name (headers, keys) and by shape, before pino serialises them.
      logMethod(args, method) {
        method.apply(this, args.map((arg) => scrub.value(arg)) as Parameters<typeof method>);
      },
      // The finished line once more by shape and value: a child's bindings are serialised once,
      // when the child is made, where no other hook sees them.
      streamWrite: (line) => scrub.text(line),
    },
    // Errors arrive already scrubbed into plain objects; one that did not is scrubbed the same way.
    serializers: { err: (err: unknown) => scrub.value(err) },
  };
  return options.destination === undefined ? pino(settings) : pino(settings, options.destination);
}
