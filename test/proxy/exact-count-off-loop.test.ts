import type { APIError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tiktokenLoaded } from '../harness/tiktoken-loaded.ts';
import { createTokenCounter } from '../../core/metering/tokens.ts';
import type { ProxyRig } from './harness.ts';
import { askChat, startTokenLimitRig } from './token-limit-rig.ts';

const LIMIT = 500;
// Both short (under 2,048 characters): the first about one token per six bytes, the second one per byte or two.
const WITHIN = 'hello '.repeat(300);
const OVER = ' 7'.repeat(900);
let rig: ProxyRig;

beforeAll(async () => {
  rig = await startTokenLimitRig(LIMIT);
});
afterAll(async () => {
  await rig.close();
});

const ask = (execution: string, content: string) => askChat(rig, execution, content);

describe("the proxy's exact counts of short prompts", () => {
  it('are made on the token thread: tiktoken is never loaded on the event loop, and they are its counts', async () => {
    expect(tiktokenLoaded()).toBe(false);
    // Its bytes are over the limit and its tokens are not: allowed only on the exact count.
    const answer = await ask('exec-short-within', WITHIN);
    expect(answer.choices.length).toBeGreaterThan(0);
    const before = rig.sim.requests.length;
    const error = await ask('exec-short-over', OVER).catch((e: unknown) => e);
    expect((error as APIError).code).toBe('SVC-POL-2001');
    expect(rig.sim.requests.length).toBe(before);
    expect(tiktokenLoaded()).toBe(false);

    // tiktoken's own counts, loaded here only now, put the two on either side of the limit.
    const tokens = createTokenCounter();
    const count = (content: string) => tokens.countChatMessages('gpt-4o-mini', [{ role: 'user', content }]);
    expect(Buffer.byteLength(WITHIN)).toBeGreaterThan(LIMIT);
    expect(count(WITHIN)).toBeLessThanOrEqual(LIMIT);
    expect(count(OVER)).toBeGreaterThan(LIMIT);
    tokens.free();
  });
});
