/**
 * The encoding steps a governed call no longer repeats, each alone, in µs of CPU per call over
 * 20,000 (`process.cpuUsage`), four rounds:
 *
 * - the outbox's append of the bench's `llm.call` event in a commit of its own: measured as JSON,
 *   then stored as msgpack of its object (before) or as that JSON text (after);
 * - a stream request's body (parsed, then given the stream usage it asks for): written again
 *   whole (before) or the received text with the field appended (after);
 * - a UTF-8 body decoded strictly, then encoded again and compared (before) or decoded alone (after).
 *
 *   node test/bench/encode-steps.ts [prompt=small|big]   # big: a prompt of 10,800 characters
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { open } from 'lmdb';
import { appendFields } from '../../proxy/governance/append-fields.ts';
import { callEvent } from './call-event.ts';

const N = 20_000;
const dir = mkdtempSync(join(tmpdir(), 'bench-encode-steps-'));
const root = open({ path: dir, noSync: true });
const db = root.openDB<unknown, number>({ name: 'outbox', encoding: 'msgpack' });
const content = process.argv[2] === 'big' ? 'lorem ipsum dolor '.repeat(600) : 'hi';
const body = JSON.stringify({
  model: 'gpt-4o-mini',
  max_tokens: 64,
  stream: true,
  messages: [{ role: 'user', content }],
});
const bytes = Buffer.from(body);
const added = { stream_options: { include_usage: true } };

function micros(step: () => void): string {
  const start = process.cpuUsage();
  for (let i = 0; i < N; i++) step();
  const spent = process.cpuUsage(start);
  return ((spent.user + spent.system) / N).toFixed(2);
}

let key = 0;
const steps = {
  'outbox, object': () => {
    const event = callEvent(key);
    JSON.stringify(event);
    root.transactionSync(() => db.putSync(key++, event));
  },
  'outbox, text': () => {
    const text = JSON.stringify(callEvent(key));
    root.transactionSync(() => db.putSync(key++, text));
  },
  'stream body, written again': () => {
    const json = JSON.parse(body) as object;
    Buffer.from(JSON.stringify({ ...json, ...added }));
  },
  'stream body, appended': () => {
    JSON.parse(body);
    appendFields(bytes, added);
  },
  'UTF-8 body, encoded again': () => {
    const text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    Buffer.from(text).equals(bytes);
  },
  'UTF-8 body, as received': () => {
    new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  },
};

console.log(`µs per call, body of ${bytes.length} bytes`);
for (let round = 0; round < 4; round++) {
  console.log(
    Object.entries(steps)
      .map(([name, step]) => `${name} ${micros(step)}`)
      .join(', '),
  );
}
await root.close();
rmSync(dir, { recursive: true, force: true });
