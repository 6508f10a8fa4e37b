import { APIError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTokenCounter } from '../../core/metering/tokens.ts';
import type { ProxyRig } from './harness.ts';
import { askChat, startTokenLimitRig } from './token-limit-rig.ts';

const LIMIT = 100_000;
// About one token per six bytes: the byte bound is six times the exact count.
const prompt = (words: number) => 'hello '.repeat(words);
let rig: ProxyRig;
const tokens = createTokenCounter();

beforeAll(async () => {
  rig = await startTokenLimitRig(LIMIT);
});
afterAll(async () => {
  await rig.close();
  tokens.free();
});

const ask = (execution: string, content: string) => askChat(rig, execution, content);

describe('a policy on estimated_input_tokens over a large prompt (counted on the token thread)', () => {
  it('decides on the exact count: allows a prompt whose bytes exceed the limit and whose tokens do not', async () => {
    const text = prompt(60_000);
    const exact = tokens.countText('gpt-4o-mini', text);
    expect(Buffer.byteLength(text)).toBeGreaterThan(LIMIT);
    expect(exact).toBeLessThan(LIMIT);
    const answer = await ask('exec-large-allowed', text);
    expect(answer.choices.length).toBeGreaterThan(0);
  });

  it('refuses a prompt whose exact count exceeds the limit, with 403 SVC-POL-2001', async () => {
    const text = prompt(140_000);
    expect(tokens.countText('gpt-4o-mini', text)).toBeGreaterThan(LIMIT);
    const before = rig.sim.requests.length;
    const error = await ask('exec-large-refused', text).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(APIError);
    expect((error as APIError).status).toBe(403);
    expect((error as APIError).code).toBe('SVC-POL-2001');
    expect(rig.sim.requests.length).toBe(before);
  });
});
