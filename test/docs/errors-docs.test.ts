import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ERROR_CATALOGUE } from '../../core/errors/catalogue.ts';

describe('docs/errors.md', () => {
  it('lists every SVC code with its HTTP status', () => {
    const doc = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8');
    for (const [code, spec] of Object.entries(ERROR_CATALOGUE)) {
      expect(doc, code).toMatch(new RegExp(`\\| \`${code}\` +\\| [^|]+ \\| ${spec.http} +\\|`));
    }
  });
});
