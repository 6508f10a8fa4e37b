const LF = 0x0a;

/**
 * Splits one upstream read after each blank line (`\n\n`), so a stream is metered event by event
 * and a cut-off lands on the event that crossed the limit rather than at the end of a read that
 * may carry hundreds of events. Bytes are not copied; a read without a blank line stays whole.
 */
export function sliceAfterEvents(chunk: Uint8Array): Uint8Array[] {
  const slices: Uint8Array[] = [];
  let start = 0;
  for (let i = 1; i < chunk.length; i++) {
    if (chunk[i] === LF && chunk[i - 1] === LF) {
      slices.push(chunk.subarray(start, i + 1));
      start = i + 1;
    }
  }
  if (start < chunk.length) slices.push(chunk.subarray(start));
  return slices;
}
