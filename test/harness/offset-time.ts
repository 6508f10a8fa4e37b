/**
 * The instant `iso` (or `ms`) written with a UTC offset of `offsetMinutes` and all nine digits of
 * a second: the same time as another spelling, whose text sorts elsewhere.
 */
export function withOffset(at: string | number, offsetMinutes: number): string {
  const ms = typeof at === 'number' ? at : Date.parse(at);
  const local = new Date(ms + offsetMinutes * 60_000).toISOString().slice(0, 23);
  const size = Math.abs(offsetMinutes);
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${local}000000${offsetMinutes < 0 ? '-' : '+'}${pad(Math.floor(size / 60))}:${pad(size % 60)}`;
}
