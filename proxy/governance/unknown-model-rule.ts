import type { UnknownModelRule } from '../../core/metering/prices.ts';

/** Reads config key unknown_model_price (`zero`, or `fixed:<input>:<output>` USD per million tokens). */
export function parseUnknownModelRule(value: string): UnknownModelRule {
  const [mode, input, output] = value.split(':');
  if (mode === 'fixed') return { mode: 'fixed', input: Number(input), output: Number(output) };
  return { mode: 'zero' };
}
