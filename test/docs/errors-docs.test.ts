import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ERROR_CATALOGUE } from '../../core/errors/catalogue.ts';
import { ErrorPages } from '../../core/errors/documentation.ts';

const doc = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8');

describe('docs/errors.md', () => {
  it('lists every SVC code with its HTTP status', () => {
    for (const [code, spec] of Object.entries(ERROR_CATALOGUE)) {
      // Cells are padded to the column width (Prettier aligns the table).
      expect(doc, code).toMatch(new RegExp(`\\| \`${code}\` +\\| [^|]+\\| ${spec.http} +\\|`));
    }
  });

  it('has a section for every SVC code, which is the page served for it', () => {
    const pages = ErrorPages.fromMarkdown(doc);
    expect(pages.codes().sort()).toEqual(Object.keys(ERROR_CATALOGUE).sort());
    expect(pages.page('SVC-SYS-9007')).toContain('request_id');
    expect(pages.page('SVC-NONE-0000')).toBeUndefined();
  });

  it('refuses to build pages when a code has no section, so no link can dangle', () => {
    const without = doc.replace(/### SVC-SYS-9009\n/, '### Something else\n');
    expect(() => ErrorPages.fromMarkdown(without)).toThrow(/SVC-SYS-9009/);
  });
});
