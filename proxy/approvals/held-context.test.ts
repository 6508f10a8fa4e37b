import { describe, expect, it } from 'vitest';
import { MAX_HELD_CONTEXT_BYTES } from '../../core/sync/contract.ts';
import { heldContext, MAX_CONTEXT_VALUE_BYTES } from './held-context.ts';

describe('heldContext', () => {
  it('keeps values in order while they fit what the control plane keeps, and notes the size of the rest', () => {
    const value = 'v'.repeat(MAX_CONTEXT_VALUE_BYTES - 2);
    const context = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`k${i}`, value]));
    const kept = heldContext(context);
    expect(Buffer.byteLength(JSON.stringify(kept))).toBeLessThanOrEqual(MAX_HELD_CONTEXT_BYTES);
    expect(kept.k0).toBe(value);
    expect(kept.k39).toBe(`[${MAX_CONTEXT_VALUE_BYTES} bytes, not kept]`);
  });
});
