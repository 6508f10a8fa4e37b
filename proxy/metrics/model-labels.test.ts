import { describe, expect, it } from 'vitest';
import { createModelLabels, OTHER_MODEL } from './model-labels.ts';

describe('model labels', () => {
  it('keeps the first models by name and collapses any beyond the cap into other', () => {
    const labels = createModelLabels(2);
    expect(['a', 'b', 'a', 'c', 'b', 'd'].map((m) => labels.label(m))).toEqual([
      'a',
      'b',
      'a',
      OTHER_MODEL,
      'b',
      OTHER_MODEL,
    ]);
  });
});
