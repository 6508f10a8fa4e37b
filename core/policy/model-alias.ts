import { modelFamilyId } from '../metering/prices.ts';
import { BoundedMemo } from '../resilience/bounded-memo.ts';
import { foldCase } from './case-fold.ts';

/** The context fields that name the model of an `llm:` action. */
const MODEL_FIELDS = ['model', 'model_id', 'model_name'] as const;
const LLM = 'llm:';
/** How many ids' family names are remembered: agents name few models, made-up ones cannot grow it. */
const REMEMBERED_IDS = 512;
/** `modelFamilyId`, remembered: the hot path pays a lookup, not a normalisation and a search. */
const families = new BoundedMemo(REMEMBERED_IDS, modelFamilyId);

/** An `llm:` action and its context under the model's family name. */
export interface ModelAlias {
  readonly action: string;
  readonly context: Readonly<Record<string, unknown>>;
}

/**
 * A model has more names than one: a provider takes `openai/gpt-4o` or the snapshot
 * `gpt-4o-2024-08-06` for `gpt-4o`. The action (already folded) and context under the family
 * name, or null when they already use it. The copy keeps the context's getters uncalled.
 */
export function modelAlias(action: string, context: Readonly<Record<string, unknown>>): ModelAlias | null {
  if (!action.startsWith(LLM)) return null;
  const model = action.slice(LLM.length);
  const family = families.get(model);
  let renamed: Record<string, PropertyDescriptor> | null = null;
  for (const field of MODEL_FIELDS) {
    const value = Object.hasOwn(context, field) ? context[field] : undefined;
    if (typeof value !== 'string') continue;
    const name = families.get(value);
    if (name === foldCase(value)) continue;
    renamed ??= {};
    renamed[field] = { value: name, enumerable: true, writable: false, configurable: true };
  }
  if (renamed === null && family === model) return null;
  return {
    action: `${LLM}${family}`,
    context:
      renamed === null
        ? context
        : (Object.create(Object.getPrototypeOf(context) as object | null, {
            ...Object.getOwnPropertyDescriptors(context),
            ...renamed,
          }) as Record<string, unknown>),
  };
}
