import { asError } from '../errors/index.ts';

/**
 * Why an asynchronous LMDB commit failed: lmdb-js rejects it with a placeholder ("Commit failed")
 * whose `commitError` brings the cause.
 */
export async function commitFailure(error: unknown): Promise<Error> {
  const pending = (error as { commitError?: Promise<unknown> } | null)?.commitError;
  if (pending === undefined) return asError(error);
  return asError(
    await pending.then(
      () => error,
      (reason: unknown) => reason,
    ),
  );
}
