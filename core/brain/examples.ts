import type { SemanticCategory } from '../policy/semantic-judge.ts';
import type { TextView } from './text-view.ts';

/**
 * Tenant-defined categories, judged by similarity to their examples: each text and example is
 * a vector of character trigram counts (lower case, whitespace folded); the score is the cosine
 * of the closest example. A counter-example at least as close cancels it. Deterministic,
 * no model, linear in the text; good at "the same action written differently" (other names,
 * flags, spacing), blind to meaning. An LLM judge does meaning.
 */
type Profile = { counts: Map<string, number>; norm: number };

interface CompiledCategory {
  readonly examples: readonly Profile[];
  readonly counters: readonly Profile[];
  /** Texts are compared in windows about this long, so a long text does not dilute a short example. */
  readonly window: number;
}

const MAX_WINDOWS = 16;

function profile(text: string): Profile {
  const folded = ` ${text.toLowerCase().replace(/\s+/g, ' ').trim()} `;
  const counts = new Map<string, number>();
  for (let i = 0; i + 3 <= folded.length; i++) {
    const g = folded.slice(i, i + 3);
    counts.set(g, (counts.get(g) ?? 0) + 1);
  }
  let sum = 0;
  for (const n of counts.values()) sum += n * n;
  return { counts, norm: Math.sqrt(sum) };
}

function cosine(a: Profile, b: Profile): number {
  if (a.norm === 0 || b.norm === 0) return 0;
  const [small, large] = a.counts.size <= b.counts.size ? [a, b] : [b, a];
  let dot = 0;
  for (const [g, n] of small.counts) dot += n * (large.counts.get(g) ?? 0);
  return dot / (a.norm * b.norm);
}

const compiledCategories = new WeakMap<SemanticCategory, CompiledCategory>();

function compile(category: SemanticCategory): CompiledCategory {
  let compiled = compiledCategories.get(category);
  if (compiled === undefined) {
    const texts = [...category.examples, ...category.counter_examples];
    compiled = {
      examples: category.examples.map(profile),
      counters: category.counter_examples.map(profile),
      window: Math.max(64, 2 * Math.max(...texts.map((t) => t.length))),
    };
    compiledCategories.set(category, compiled);
  }
  return compiled;
}

export interface Similarity {
  readonly confidence: number;
  readonly view: TextView;
  readonly start: number;
  readonly end: number;
}

/** The closest window of any view to the category's examples, net of its counter-examples. */
export function similarity(category: SemanticCategory, views: readonly TextView[]): Similarity | undefined {
  const c = compile(category);
  let best: Similarity | undefined;
  for (const view of views) {
    const text = view.norm;
    const step = Math.max(1, Math.ceil(Math.max(0, text.length - c.window) / (MAX_WINDOWS - 1)));
    for (let start = 0; ; start += step) {
      const end = Math.min(text.length, start + c.window);
      const p = profile(text.slice(start, end));
      const positive = Math.max(0, ...c.examples.map((e) => cosine(p, e)));
      const negative = Math.max(0, ...c.counters.map((e) => cosine(p, e)));
      const confidence = negative >= positive ? 0 : positive;
      if (best === undefined || confidence > best.confidence) best = { confidence, view, start, end };
      if (end >= text.length) break;
    }
  }
  return best;
}
