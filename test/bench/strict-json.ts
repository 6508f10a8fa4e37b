/**
 * What the strict JSON reading (`parseStrictJson`: JSON.parse, then one pass for repeated keys
 * and depth) costs per governed call: the bench's whole answer and its request body, as the
 * fast upstream and the bench's clients send them. Prints, per text, the least µs per scan for
 * repeated keys alone (`duplicateKey`) and per whole reading over `rounds` rounds of `n` each.
 * Prints figures; not a test.
 *
 *   node test/bench/strict-json.ts [n=300000] [rounds=12]
 */
import { duplicateKey, parseStrictJson } from '../../proxy/governance/strict-json.ts';

const n = Number(process.argv[2] ?? 300_000);
const rounds = Number(process.argv[3] ?? 12);
const texts = {
  'whole answer': JSON.stringify({
    id: 'chatcmpl-bench',
    object: 'chat.completion',
    model: 'gpt-4o-mini',
    choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 12, completion_tokens: 1, total_tokens: 13 },
  }),
  request: JSON.stringify({
    model: 'gpt-4o-mini',
    max_tokens: 64,
    stream: true,
    messages: [{ role: 'user', content: 'hi there' }],
  }),
};

/** The least µs per call of `fn` over the rounds. */
function least(fn: () => unknown): number {
  let best = Number.POSITIVE_INFINITY;
  for (let r = 0; r < rounds; r++) {
    const started = performance.now();
    for (let i = 0; i < n; i++) fn();
    best = Math.min(best, ((performance.now() - started) * 1000) / n);
  }
  return best;
}

for (const [name, text] of Object.entries(texts)) {
  const scan = least(() => duplicateKey(text));
  const whole = least(() => parseStrictJson(text, { maxDepth: 64 }));
  console.log(
    `${name} (${text.length} characters): scan ${scan.toFixed(3)} µs, parseStrictJson ${whole.toFixed(3)} µs`,
  );
}
