import { describe, expect, it } from 'vitest';
import { isSvcError } from '../../core/errors/index.ts';
import { compileReverseRoutes, DEFAULT_REVERSE_ROUTES } from './reverse-routes.ts';

describe('compileReverseRoutes', () => {
  const route = compileReverseRoutes({
    ...DEFAULT_REVERSE_ROUTES,
    '/openai/azure': 'https://example.openai.azure.com/base',
  });

  it('maps a prefixed path to the upstream origin with the rest of the path and the query', () => {
    expect(route('/openai/v1/chat/completions?x=1')).toEqual({
      route: 'openai',
      url: new URL('https://api.openai.com/v1/chat/completions?x=1'),
    });
    expect(route('/gemini/v1beta/models')?.url.href).toBe('https://generativelanguage.googleapis.com/v1beta/models');
  });

  it('prefers the longest prefix and keeps the target base path', () => {
    expect(route('/openai/azure/deployments/x')?.url.href).toBe('https://example.openai.azure.com/base/deployments/x');
  });

  it('keeps a path starting with // on the route host', () => {
    const target = route('/openai//evil.test/steal?x=1');
    expect(target?.url.host).toBe('api.openai.com');
    expect(target?.url.pathname).toBe('//evil.test/steal');
  });

  it('matches whole segments only', () => {
    expect(route('/openaix/v1')).toBeUndefined();
    expect(route('/other')).toBeUndefined();
    expect(route('/anthropic')?.url.href).toBe('https://api.anthropic.com/');
  });

  it('refuses a malformed table with SVC-SYS-9002 naming the prefix', () => {
    let caught: unknown;
    try {
      compileReverseRoutes({ openai: 'not a url' });
    } catch (error) {
      caught = error;
    }
    expect(isSvcError(caught) && caught.code).toBe('SVC-SYS-9002');
    expect(isSvcError(caught) && caught.fieldViolations.map((v) => v.field).join(' ')).toContain('openai');
  });
});
