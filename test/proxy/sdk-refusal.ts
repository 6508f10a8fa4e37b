import { APIError } from 'openai';
import { expect } from 'vitest';

/** The SDK's error for a call expected to be refused; attached at once, so no rejection goes unhandled. */
export async function sdkRefusal(call: Promise<unknown>): Promise<APIError> {
  const error = await call.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(APIError);
  return error as APIError;
}
