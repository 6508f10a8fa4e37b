/**
 * The OpenAI stream meter alone: the bench upstream's 20-event stream (with its usage chunk and
 * `[DONE]`) framed, parsed and metered, arriving in three chunks, then priced event by event as
 * the proxy's cut-off check does. Prints µs per stream.
 *
 *   node test/bench/stream-meter.ts [streams=30000]
 */
import { costPico, loadPriceTable } from '../../core/metering/prices.ts';
import { createTokenCounter } from '../../core/metering/tokens.ts';
import { createOpenAiAdapter } from '../../proxy/providers/openai.ts';
import { createAdapterDeps } from '../../proxy/providers/registry.ts';
import { STREAM_END, streamChunk } from './fast-upstream.ts';

const streams = Number(process.argv[2] ?? 30_000);
const tokens = createTokenCounter();
const prices = loadPriceTable();
const openai = createOpenAiAdapter(createAdapterDeps(tokens, prices));
const raw = Buffer.from(Array.from({ length: 20 }, (_, i) => streamChunk(`w${i} `)).join('') + STREAM_END);
const third = Math.floor(raw.length / 3);
const chunks = [raw.subarray(0, third), raw.subarray(third, 2 * third), raw.subarray(2 * third)];

async function meterOne(): Promise<number> {
  const meter = openai.createStreamMeter('chat', 'gpt-4o-mini', {
    estimatedInputTokens: () => 12,
    hideStreamUsage: true,
  });
  let events = 0;
  for (const chunk of chunks)
    for (const step of meter.push(chunk)) {
      events++;
      costPico(prices, 'gpt-4o-mini', step.usage, 'openai');
    }
  await meter.end();
  return events;
}

console.log(`stream meter: ${streams} streams of ${raw.length} bytes, node ${process.version}`);
for (let i = 0; i < Math.min(2000, streams); i++) await meterOne();
for (let round = 1; round <= 3; round++) {
  let events = 0;
  const started = process.hrtime.bigint();
  for (let i = 0; i < streams; i++) events += await meterOne();
  const micros = Number(process.hrtime.bigint() - started) / 1000 / streams;
  console.log(`  round ${round}: ${micros.toFixed(1)} µs per stream (${events / streams} events each)`);
}
tokens.free();
