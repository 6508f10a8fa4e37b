import { describe, expect, it } from 'vitest';
import { createModelLabels, OTHER_MODEL } from './model-labels.ts';

describe('model labels', () => {
  it('keeps the first real models by name and collapses any beyond the cap into other', () => {
    const labels = createModelLabels(2, () => true);
    expect(['a', 'b', 'a', 'c', 'b', 'd'].map((m) => labels.label(m))).toEqual([
      'a',
      'b',
      'a',
      OTHER_MODEL,
      'b',
      OTHER_MODEL,
    ]);
  });

  it('gives a slot only to a model the price table lists or its provider served', () => {
    const labels = createModelLabels(50, (model) => model === 'gpt-4o');
    const madeUp = Array.from({ length: 60 }, (_, i) => `made-up-${i}`);
    expect(madeUp.map((m) => labels.label(m))).toEqual(madeUp.map(() => OTHER_MODEL));
    expect(labels.label('gpt-4o')).toBe('gpt-4o');
    expect(labels.label('gpt-4o-2024-08-06')).toBe(OTHER_MODEL);
    labels.served('gpt-4o-2024-08-06');
    expect(labels.label('gpt-4o-2024-08-06')).toBe('gpt-4o-2024-08-06');
  });
});
