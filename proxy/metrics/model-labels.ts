/**
 * Bounds the `model` label: at most `cap` distinct models keep their name, any other is counted
 * as `other`, so a client sending arbitrary model strings cannot grow the metric series without
 * bound. A model earns a slot only when it is real: listed in the price table under the name the
 * client wrote, or served by its provider (`served`). Names an agent makes up (a provider
 * refuses them, and the table lists none of them) count as `other` and never take a slot a real
 * model needs later.
 */
export interface ModelLabels {
  label(model: string): string;
  /** The provider answered a call for `model` successfully: it may take a slot of its own. */
  served(model: string): void;
}

export const OTHER_MODEL = 'other';

/** `listed`: whether the price table lists a model under exactly this name. */
export function createModelLabels(cap: number, listed: (model: string) => boolean): ModelLabels {
  const known = new Set<string>();
  const claim = (model: string): boolean => {
    if (known.size < cap) known.add(model);
    return known.has(model);
  };
  return {
    label(model) {
      if (known.has(model)) return model;
      return listed(model) && claim(model) ? model : OTHER_MODEL;
    },
    served(model) {
      if (!known.has(model)) claim(model);
    },
  };
}
