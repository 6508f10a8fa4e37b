import { describe, expect, it } from 'vitest';
import { isSvcError } from '../../core/errors/index.ts';
import { parseUpstreamOverrides, upstreamTarget } from './overrides.ts';

describe('parseUpstreamOverrides', () => {
  it('parses host=url pairs separated by commas', () => {
    const overrides = parseUpstreamOverrides(
      ' api.openai.com=https://127.0.0.1:9443 , API.Anthropic.com=http://sim:8080/anthropic',
    );
    expect([...overrides.keys()]).toEqual(['api.openai.com', 'api.anthropic.com']);
    expect(overrides.get('api.openai.com')?.href).toBe('https://127.0.0.1:9443/');
  });

  it('reads an empty setting as no overrides', () => {
    expect(parseUpstreamOverrides('').size).toBe(0);
  });

  it.each(['api.openai.com', '=https://x', 'api.openai.com=ftp://x', 'api.openai.com=not a url'])(
    'refuses %j with SVC-SYS-9002 naming the key',
    (value) => {
      let caught: unknown;
      try {
        parseUpstreamOverrides(value);
      } catch (error) {
        caught = error;
      }
      expect(isSvcError(caught) && caught.code).toBe('SVC-SYS-9002');
      expect(isSvcError(caught) && caught.fieldViolations[0]?.field).toBe('upstream_overrides');
    },
  );
});

describe('upstreamTarget', () => {
  const overrides = parseUpstreamOverrides(
    'api.openai.com=https://127.0.0.1:9443,api.anthropic.com=http://sim:8080/anthropic/',
  );

  it('sends an overridden host to the override origin, under its base path, keeping path and query', () => {
    expect(upstreamTarget(new URL('https://api.openai.com/v1/models?limit=2'), overrides)).toEqual({
      origin: 'https://127.0.0.1:9443',
      path: '/v1/models?limit=2',
      overridden: true,
    });
    expect(upstreamTarget(new URL('https://api.anthropic.com/v1/messages'), overrides)).toEqual({
      origin: 'http://sim:8080',
      path: '/anthropic/v1/messages',
      overridden: true,
    });
  });

  it('keeps a path starting with // on the override host', () => {
    const target = upstreamTarget(new URL('https://api.openai.com//evil.test/x'), overrides);
    expect(target.origin).toBe('https://127.0.0.1:9443');
    expect(new URL(`${target.origin}${target.path}`).host).toBe('127.0.0.1:9443');
  });

  it('gives the path a URL parsed again from the joined text would have: encoded, dot segments resolved', () => {
    for (const asked of [
      'https://api.anthropic.com/v1/a%20b/../c?q=%C3%A9&x=/../y#frag',
      'https://API.Anthropic.com/./v1//m%2e%2E/n?',
      'https://api.anthropic.com/é/ü?ä=ö',
    ]) {
      const target = upstreamTarget(new URL(asked), overrides);
      const reparsed = new URL(`${target.origin}${target.path}`);
      expect(target.path).toBe(`${reparsed.pathname}${reparsed.search}`);
    }
  });

  it('leaves other hosts at their own origin, path and query', () => {
    expect(upstreamTarget(new URL('https://example.com/a?b=1'), overrides)).toEqual({
      origin: 'https://example.com',
      path: '/a?b=1',
      overridden: false,
    });
  });
});
