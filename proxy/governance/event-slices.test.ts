import { describe, expect, it } from 'vitest';
import { sliceAfterEvents } from './event-slices.ts';

const text = (slices: Uint8Array[]) => slices.map((s) => Buffer.from(s).toString('utf8'));

describe('sliceAfterEvents', () => {
  it('cuts after every blank line and keeps the tail', () => {
    expect(text(sliceAfterEvents(Buffer.from('data: a\n\ndata: b\n\ndata: c')))).toEqual([
      'data: a\n\n',
      'data: b\n\n',
      'data: c',
    ]);
  });

  it('leaves a read without a blank line whole, and an empty read empty', () => {
    expect(text(sliceAfterEvents(Buffer.from('[{"a":1},')))).toEqual(['[{"a":1},']);
    expect(sliceAfterEvents(new Uint8Array(0))).toEqual([]);
  });
});
