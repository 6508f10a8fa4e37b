import { SvcError } from '../../core/errors/index.ts';

export interface NamedUrl {
  name: string;
  url: URL;
}

export interface NameRule {
  /** What the left side is called in the error (`name`, `host`). */
  label: string;
  pattern: RegExp;
}

function invalid(key: string, description: string): SvcError {
  return new SvcError('SVC-SYS-9002', `invalid ${key}: ${description}`, { fields: key }, [{ field: key, description }]);
}

/**
 * Parses a `name=url,name=url` setting: each name must match `rule`, each URL be http(s), and no
 * name may appear twice (which entry would win is not obvious, so neither does). Empty → none.
 */
export function parseNameUrlList(value: string, key: string, rule: NameRule): NamedUrl[] {
  const entries: NamedUrl[] = [];
  const seen = new Set<string>();
  for (const entry of value
    .split(',')
    .map((e) => e.trim())
    .filter((e) => e !== '')) {
    const at = entry.indexOf('=');
    const name = at > 0 ? entry.slice(0, at).trim() : '';
    const url = URL.parse(at > 0 ? entry.slice(at + 1).trim() : '');
    if (!rule.pattern.test(name) || url === null || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
      throw invalid(key, `entry "${entry}" must be ${rule.label}=http(s)://target`);
    }
    const folded = name.toLowerCase();
    if (seen.has(folded)) throw invalid(key, `${rule.label} "${name}" appears more than once`);
    seen.add(folded);
    entries.push({ name, url });
  }
  return entries;
}
