/** Where a JetStream message stands: its stream sequence and how many times it was delivered. */
export interface AckPosition {
  seq: number;
  deliveryCount: number;
}

const PREFIX = '$JS.ACK.';
const DOT = 46;
const ZERO = 48;
const NINE = 57;

/** The digits between `from` and `to` as a number, or -1 when there are none or another character. */
function digits(subject: string, from: number, to: number): number {
  if (from >= to) return -1;
  let value = 0;
  for (let i = from; i < to; i++) {
    const c = subject.charCodeAt(i);
    if (c < ZERO || c > NINE) return -1;
    value = value * 10 + (c - ZERO);
  }
  return value;
}

/**
 * Reads a message's position from its reply subject, `$JS.ACK.<stream>.<consumer>.<delivered>.
 * <stream seq>.<consumer seq>.<time>.<pending>` (servers before 2.10) or the same with
 * `<domain>.<account hash>.` after `$JS.ACK.` and, from 2.10, a token at its end. The client's
 * `info` splits the whole subject and parses each of its numbers, for every message; this reads the
 * two that are used. Undefined for any other subject: the caller then asks the client, which
 * refuses what is no JetStream message.
 */
export function ackPosition(reply: string): AckPosition | undefined {
  if (!reply.startsWith(PREFIX)) return undefined;
  // Where each token after the prefix ends.
  const ends: number[] = [];
  for (let i = PREFIX.length; i < reply.length; i++) {
    if (reply.charCodeAt(i) === DOT) ends.push(i);
  }
  ends.push(reply.length);
  const tokens = ends.length + 2;
  // The delivered count is the fifth token in the old form, the seventh in the new (as the client reads them).
  const delivered = tokens === 9 ? 4 : tokens >= 11 ? 6 : -1;
  if (delivered < 0) return undefined;
  const deliveryCount = digits(reply, ends[delivered - 3]! + 1, ends[delivered - 2]!);
  const seq = digits(reply, ends[delivered - 2]! + 1, ends[delivered - 1]!);
  return deliveryCount < 1 || seq < 1 ? undefined : { seq, deliveryCount };
}
