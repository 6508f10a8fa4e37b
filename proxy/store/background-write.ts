export interface StoreLogger {
  warn(object: Record<string, unknown>, message: string): void;
}

/**
 * Lets a write to the proxy's store go on without the caller waiting, and logs its failure. Such
 * a copy on disk serves a restart only (the one in memory is in force meanwhile), so a write that
 * fails (a full map, a broken disk) would otherwise be found out only when a restart no longer
 * knows what it held.
 */
export function writeInBackground(
  written: Promise<unknown>,
  logger: StoreLogger,
  fields: Record<string, unknown>,
  message: string,
): void {
  written.catch((error: unknown) =>
    logger.warn({ ...fields, err: error instanceof Error ? error.message : String(error) }, message),
  );
}
