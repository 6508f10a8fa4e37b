import { readFileSync, writeFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { CHART_DIR } from './render.ts';

export const DOC = new URL('../../docs/kubernetes.md', import.meta.url).pathname;
export const START = '<!-- values-table:start (generated from values.schema.json: node test/helm/values-table.ts) -->';
export const END = '<!-- values-table:end -->';

interface Schema {
  type?: string | string[];
  description?: string;
  properties?: Record<string, Schema>;
  additionalProperties?: boolean | Schema;
  items?: Schema;
  enum?: unknown[];
}

function typeOf(schema: Schema): string {
  if (schema.enum !== undefined) return schema.enum.map((v) => JSON.stringify(v)).join(' \\| ');
  const type = Array.isArray(schema.type) ? schema.type.join(' \\| ') : (schema.type ?? 'any');
  return type === 'array' && schema.items?.type !== undefined ? `array of ${String(schema.items.type)}` : type;
}

function valueAt(values: unknown, path: string[]): unknown {
  return path.reduce<unknown>((v, key) => (v !== null && typeof v === 'object' ? (v as any)[key] : undefined), values);
}

function show(value: unknown): string {
  if (value === undefined) return '';
  const text = JSON.stringify(value);
  return `\`${text.replaceAll('|', '\\|')}\``;
}

/** The markdown table of every chart value: key, type, default (values.yaml), meaning (the schema). */
export function valuesTable(): string {
  const schema = JSON.parse(readFileSync(`${CHART_DIR}/values.schema.json`, 'utf8')) as Schema;
  const values = parseYaml(readFileSync(`${CHART_DIR}/values.yaml`, 'utf8')) as unknown;
  const rows: string[] = ['| value | type | default | meaning |', '| --- | --- | --- | --- |'];
  const walk = (node: Schema, path: string[], keys: string[]): void => {
    if (node.properties !== undefined) {
      for (const [key, child] of Object.entries(node.properties)) walk(child, [...path, key], [...keys, key]);
      return;
    }
    if (typeof node.additionalProperties === 'object' && node.additionalProperties.properties !== undefined) {
      rows.push(`| \`${keys.join('.')}\` | map | ${show(valueAt(values, path))} | ${node.description ?? ''} |`);
      walk(node.additionalProperties, [...path, '<name>'], [...keys, '<name>']);
      return;
    }
    rows.push(
      `| \`${keys.join('.')}\` | ${typeOf(node)} | ${show(valueAt(values, path))} | ${node.description ?? ''} |`,
    );
  };
  walk(schema, [], []);
  return rows.join('\n');
}

/** The table as docs/kubernetes.md holds it between the markers. */
export function documentedTable(doc = readFileSync(DOC, 'utf8')): string | undefined {
  const start = doc.indexOf(START);
  const end = doc.indexOf(END);
  if (start < 0 || end < start) return undefined;
  return doc.slice(start + START.length, end).trim();
}

if (process.argv[1] !== undefined && import.meta.filename === process.argv[1]) {
  const doc = readFileSync(DOC, 'utf8');
  const start = doc.indexOf(START);
  const end = doc.indexOf(END);
  if (start < 0 || end < start) throw new Error(`${DOC} has no ${START} ... ${END} markers`);
  writeFileSync(DOC, `${doc.slice(0, start + START.length)}\n\n${valuesTable()}\n\n${doc.slice(end)}`);
}
