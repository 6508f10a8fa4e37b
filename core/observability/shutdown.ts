import type { Logger } from 'pino';
import { Counter, Registry } from 'prom-client';
import { configuredSecrets, createScrubber } from './redact.ts';

/** Spec 8: servers get 30 seconds to shut down before the process exits regardless (unless configured). */
export const SHUTDOWN_TIMEOUT_MS = 30_000;

/** After an uncaught exception the state is unknown: the graceful stop gets less time. */
export const FAILURE_SHUTDOWN_TIMEOUT_MS = 10_000;

export interface ProcessGuard {
  /** Registers the failure counters on the registry the process serves at `/metrics`. */
  expose(registry: Registry): void;
  /** The graceful stop, run once on SIGTERM or SIGINT (exit 0), or after an uncaught exception (exit 1). */
  onShutdown(stop: () => Promise<void>): void;
}

/**
 * The process-level failure policy, installed first thing in every `main.ts`:
 *
 * - an unhandled promise rejection is logged and counted, and the process goes on: it is one
 *   failed piece of work (a write, a reply) whose caller has already moved on, and a sidecar that
 *   exits takes its agent's traffic down with it;
 * - an uncaught exception is logged, counted and ends the process after a bounded graceful stop
 *   (exit 1). Node cannot say what the throw left half-done, and a governor running on state it
 *   cannot trust (a lease book, a budget counter mid-update) could let ungoverned spend through;
 *   the orchestrator restarts it, the outbox keeps every event, and agents' calls fail closed
 *   while it is away (docs/security.md).
 */
export function guardProcess(logger: Logger, options: { shutdownTimeoutMs?: number } = {}): ProcessGuard {
  const shutdownTimeoutMs = options.shutdownTimeoutMs ?? SHUTDOWN_TIMEOUT_MS;
  const failures = new Registry();
  const rejections = new Counter({
    name: 'svc_process_unhandled_rejections_total',
    help: 'Promise rejections no code handled; logged, the process goes on',
    registers: [failures],
  });
  const exceptions = new Counter({
    name: 'svc_process_uncaught_exceptions_total',
    help: 'Exceptions no code caught; logged, then the process stops and is restarted',
    registers: [failures],
  });
  let stop: (() => Promise<void>) | undefined;
  let stopping = false;

  const shutdown = (reason: string, exitCode: number, timeoutMs: number): void => {
    if (stopping) return;
    stopping = true;
    logger.info({ reason }, 'shutting down');
    const timer = setTimeout(() => {
      logger.error({ reason }, 'shutdown timed out');
      process.exit(1);
    }, timeoutMs);
    timer.unref();
    (stop ?? (() => Promise.resolve()))().then(
      () => process.exit(exitCode),
      (error: unknown) => {
        logger.error({ err: error }, 'shutdown failed');
        process.exit(1);
      },
    );
  };

  process.on('unhandledRejection', (reason) => {
    rejections.inc();
    logger.error({ err: reason }, 'unhandled promise rejection; the process goes on');
  });
  process.on('uncaughtException', (error) => {
    exceptions.inc();
    logger.fatal({ err: error }, 'uncaught exception; stopping the process');
    shutdown('uncaught exception', 1, FAILURE_SHUTDOWN_TIMEOUT_MS);
  });
  process.on('SIGTERM', () => shutdown('SIGTERM', 0, shutdownTimeoutMs));
  process.on('SIGINT', () => shutdown('SIGINT', 0, shutdownTimeoutMs));

  return {
    expose(registry) {
      registry.registerMetric(rejections);
      registry.registerMetric(exceptions);
    },
    onShutdown(fn) {
      stop = fn;
    },
  };
}

/**
 * A start that failed: one line on stderr and exit 1. The message may quote a URL from the
 * configuration (a NATS URL with its password), so it is scrubbed like a log line.
 */
export function failedToStart(what: string, error: unknown): never {
  const message = error instanceof Error ? error.message : String(error);
  process.stderr.write(`${what} failed to start: ${createScrubber(secretsFromEnvironment()).text(message)}\n`);
  process.exit(1);
}

/** The secrets given by `SVC_*` variables, for scrubbing before any configuration was read. */
function secretsFromEnvironment(): string[] {
  return configuredSecrets(
    Object.fromEntries(
      Object.entries(process.env).flatMap(([name, value]) =>
        name.startsWith('SVC_') ? [[name.slice(4).toLowerCase(), value]] : [],
      ),
    ),
  );
}
