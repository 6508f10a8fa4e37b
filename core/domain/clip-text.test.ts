import { describe, expect, it } from 'vitest';
import { clipText } from './clip-text.ts';

describe('clipText', () => {
  it('leaves a text within the bound as it is', () => {
    expect(clipText('tool:shell', 20)).toBe('tool:shell');
    expect(clipText('x'.repeat(20), 20)).toBe('x'.repeat(20));
  });

  it('cuts a longer one to the bound, keeping texts with one beginning apart', () => {
    const a = clipText(`tool:${'a'.repeat(300)}1`, 200);
    const b = clipText(`tool:${'a'.repeat(300)}2`, 200);
    expect(a).toHaveLength(200);
    expect(a.startsWith('tool:aaa')).toBe(true);
    expect(a).toMatch(/…[0-9a-f]{8}$/);
    expect(a).not.toBe(b);
  });

  it('never ends on half of a surrogate pair', () => {
    const clipped = clipText('😀'.repeat(100), 21);
    expect(clipped.isWellFormed()).toBe(true);
    expect(clipped.length).toBeLessThanOrEqual(21);
  });
});
