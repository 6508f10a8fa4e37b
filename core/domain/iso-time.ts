/**
 * ISO 8601 times converted once per distinct value: a batch of events is applied at one `now` and
 * its budgets share a period, so the event processor formatted and parsed the same few values for
 * every event. Each function keeps the last value it converted; both throw as `Date` does.
 */
let formattedTime = Number.NaN;
let formatted = '';

/** `date.toISOString()`. */
export function isoTime(date: Date): string {
  const time = date.getTime();
  // An invalid date (NaN) never equals the last one: `toISOString` throws for it as before.
  if (time !== formattedTime) {
    formatted = date.toISOString();
    formattedTime = time;
  }
  return formatted;
}

let parsedText: string | undefined;
let parsed = Number.NaN;

/** `Date.parse(text)`. */
export function parseIsoTime(text: string): number {
  if (text !== parsedText) {
    parsed = Date.parse(text);
    parsedText = text;
  }
  return parsed;
}
