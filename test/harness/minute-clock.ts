/**
 * A running clock that reads one second into a wall-clock minute when made: failed
 * authentications are counted per wall-clock minute, and a suite's failures must all fall in one.
 */
export function clockEarlyInAMinute(): () => Date {
  const offset = Math.ceil(Date.now() / 60_000) * 60_000 + 1_000 - Date.now();
  return () => new Date(Date.now() + offset);
}
