import { describe, expect, it } from 'vitest';
import { isSvcError } from '../../core/errors/index.ts';
import { applyOverride, parseUpstreamOverrides } from './overrides.ts';

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

describe('applyOverride', () => {
  const overrides = parseUpstreamOverrides(
    'api.openai.com=https://127.0.0.1:9443,api.anthropic.com=http://sim:8080/anthropic/',
  );

  it('sends an overridden host to the override origin, under its base path, keeping path and query', () => {
    expect(applyOverride(new URL('https://api.openai.com/v1/models?limit=2'), overrides).href).toBe(
      'https://127.0.0.1:9443/v1/models?limit=2',
    );
    expect(applyOverride(new URL('https://api.anthropic.com/v1/messages'), overrides).href).toBe(
      'http://sim:8080/anthropic/v1/messages',
    );
  });

  it('keeps a path starting with // on the override host', () => {
    expect(applyOverride(new URL('https://api.openai.com//evil.test/x'), overrides).host).toBe('127.0.0.1:9443');
  });

  it('leaves other hosts alone', () => {
    const url = new URL('https://example.com/a');
    expect(applyOverride(url, overrides)).toBe(url);
  });
});
