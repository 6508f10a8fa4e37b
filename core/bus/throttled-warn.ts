import type { BusLogger } from './bus.ts';

/**
 * A warning written at most once per `intervalMs`, saying how many occurrences it stands for
 * (`occurrences`): a flood of the same event (signals dropped, messages discarded) must not flood
 * the log in turn.
 */
export function throttledWarn(
  logger: Pick<BusLogger, 'warn'>,
  message: string,
  intervalMs = 10_000,
): (fields: Record<string, unknown>, count?: number) => void {
  let last = -Infinity;
  let pending = 0;
  return (fields, count = 1) => {
    pending += count;
    const now = Date.now();
    if (now - last < intervalMs) return;
    logger.warn({ ...fields, occurrences: pending }, message);
    last = now;
    pending = 0;
  };
}
