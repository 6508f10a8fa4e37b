import { describe, expect, it } from 'vitest';
import { MAX_TOOL_HOSTS, MORE_HOSTS, stringsOf, toolHosts } from './tool-hosts.ts';

const hostsOf = (value: unknown) => toolHosts(stringsOf(value));

describe('toolHosts', () => {
  it('reads hosts as a URL parser reaches them', () => {
    expect(hostsOf({ url: 'ht\ntps://evil.example/x' })).toEqual(['evil.example']);
    expect(hostsOf({ url: 'https:\\\\evil.example/x' })).toEqual(['evil.example']);
    expect(hostsOf({ url: 'https:/\\evil.example' })).toEqual(['evil.example']);
    expect(hostsOf({ url: 'HTTPS:evil.example/x' })).toEqual(['evil.example']);
    expect(hostsOf({ url: 'https://user:pw@%65vil.EXAMPLE.:8443/x' })).toEqual(['evil.example']);
    expect(hostsOf({ url: 'http://2130706433/' })).toEqual(['127.0.0.1']);
    expect(hostsOf({ url: 'http://0x7f.1/' })).toEqual(['127.0.0.1']);
    expect(hostsOf({ url: 'http://[::1]:8080/' })).toEqual(['[::1]']);
    expect(hostsOf({ target: 'ssh://git@evil.example/repo' })).toEqual(['evil.example']);
    expect(hostsOf({ url: 'https://bücher.example/' })).toEqual(['xn--bcher-kva.example']);
  });

  it('reads every string of the arguments, keys too, and text that is not JSON as it is', () => {
    expect(
      hostsOf({ a: ['https://one.example', { b: 'see https://two.example/x' }], 'https://three.example': 1 }),
    ).toEqual(expect.arrayContaining(['one.example', 'two.example', 'three.example']));
    expect(toolHosts(['fetch https://one.example then http:two.example'])).toEqual(['one.example', 'two.example']);
    expect(hostsOf({ path: '/etc/passwd', note: 'file:///tmp/x', n: 3 })).toEqual([]);
  });

  it('reads them all, not a first few, and marks a list it had to end', () => {
    const allowed = Array.from({ length: 20 }, (_, i) => `https://docs.example/${i}`);
    expect(hostsOf({ refs: allowed, url: 'https://evil.example/x' }).sort()).toEqual(['docs.example', 'evil.example']);
    const many = Array.from({ length: MAX_TOOL_HOSTS + 5 }, (_, i) => `https://h${i}.example`);
    const read = hostsOf({ many });
    expect(read).toHaveLength(MAX_TOOL_HOSTS + 1);
    expect(read.at(-1)).toBe(MORE_HOSTS);
  });

  it('walks deep arguments without recursion', () => {
    const deep = `${'['.repeat(20_000)}"https://deep.example"${']'.repeat(20_000)}`;
    expect(toolHosts(stringsOf(JSON.parse(deep)))).toEqual(['deep.example']);
    // A long array too: its items are not spread into one call.
    const long = Array.from({ length: 300_000 }, () => 'x');
    long.push('https://far.example');
    expect(hostsOf(long)).toEqual(['far.example']);
  });
});
