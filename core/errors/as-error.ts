/** What was thrown, as an Error: rejections and `cause`s carry Errors only. */
export function asError(value: unknown): Error {
  return value instanceof Error ? value : new Error(String(value));
}
