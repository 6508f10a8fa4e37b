import { describe, expect, it } from 'vitest';
import { appendFields } from './append-fields.ts';

const usage = { stream_options: { include_usage: true } };
const appended = (text: string) => appendFields(Buffer.from(text), usage)?.toString();

describe('appendFields', () => {
  it('adds the fields before the closing brace, keeping the text as written', () => {
    expect(appended('{"a":"caf\\u00e9", "b" : [1, {}]}')).toBe(
      '{"a":"caf\\u00e9", "b" : [1, {}],"stream_options":{"include_usage":true}}',
    );
    expect(appended('\n{ "a": {"b": 1} }\r\n\t')).toBe(
      '\n{ "a": {"b": 1},"stream_options":{"include_usage":true}}\r\n\t',
    );
  });

  it('adds no comma to an empty object', () => {
    expect(appended('{ }')).toBe('{"stream_options":{"include_usage":true}}');
    expect(JSON.parse(appended('{}')!)).toEqual(usage);
  });

  it('gives nothing for a text that does not end as an object does', () => {
    expect(appended('[1, 2]')).toBeUndefined();
    expect(appended('}')).toBeUndefined();
    expect(appended('')).toBeUndefined();
  });

  it('reads as the object with the fields added', () => {
    const body = { model: 'm', stream: true, messages: [{ role: 'user', content: '{"}"' }] };
    expect(JSON.parse(appended(JSON.stringify(body, null, 2))!)).toEqual({ ...body, ...usage });
  });
});
