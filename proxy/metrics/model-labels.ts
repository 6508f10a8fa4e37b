/**
 * Bounds the `model` label: the first `cap` distinct models keep their name, any later one is
 * counted as `other`, so a client sending arbitrary model strings cannot grow the metric series
 * without bound.
 */
export interface ModelLabels {
  label(model: string): string;
}

export const OTHER_MODEL = 'other';

export function createModelLabels(cap: number): ModelLabels {
  const known = new Set<string>();
  return {
    label(model) {
      if (known.has(model)) return model;
      if (known.size >= cap) return OTHER_MODEL;
      known.add(model);
      return model;
    },
  };
}
