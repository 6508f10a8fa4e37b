import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CONFIG_KEYS, envName } from '../../core/config/schema.ts';

describe('docs/configuration.md', () => {
  it('documents every configuration key', () => {
    const doc = readFileSync(new URL('../../docs/configuration.md', import.meta.url), 'utf8');
    const missing = CONFIG_KEYS.map(envName).filter((name) => !doc.includes(`\`${name}\``));
    expect(missing).toEqual([]);
  });
});
