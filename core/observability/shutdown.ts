import type { Logger } from 'pino';

/** Spec 8: servers get 30 seconds to shut down before the process exits regardless. */
export const SHUTDOWN_TIMEOUT_MS = 30_000;

/**
 * Runs `stop` once on SIGTERM or SIGINT, bounded by the shutdown timeout. An error thrown by a
 * request never reaches here; an unhandled rejection is logged, not fatal, so one failing call
 * cannot take the process down.
 */
export function onShutdown(logger: Logger, stop: () => Promise<void>): void {
  let stopping = false;
  const handler = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    const timer = setTimeout(() => {
      logger.error('shutdown timed out');
      process.exit(1);
    }, SHUTDOWN_TIMEOUT_MS);
    timer.unref();
    stop().then(
      () => process.exit(0),
      (error: unknown) => {
        logger.error({ err: error }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => handler('SIGTERM'));
  process.on('SIGINT', () => handler('SIGINT'));
  process.on('unhandledRejection', (reason) => logger.error({ err: reason }, 'unhandled rejection'));
}
