import { describe, expect, it } from 'vitest';
import { isSvcError } from '../../core/errors/index.ts';
import { compileInterceptList } from './intercept-list.ts';

describe('compileInterceptList', () => {
  const intercepted = compileInterceptList({
    built_in: ['api.openai.com', '*.openai.azure.com'],
    proxy_mcp_servers: ['tools.internal:7000', '[fd00::5]:8080'],
    proxy_compatible_hosts: ['vllm.internal:8000', '*.inference.internal:9000'],
    proxy_intercept_hosts: ['gateway.internal.:8443'],
  });

  it.each([
    ['api.openai.com', 443, true],
    ['API.OpenAI.com', 443, true],
    ['api.openai.com', 80, false],
    ['api.openai.com', 8443, false],
    ['res.openai.azure.com', 443, true],
    ['openai.azure.com', 443, false],
    ['res.openai.azure.com', 80, false],
    ['tools.internal', 7000, true],
    ['tools.internal', 443, false],
    ['tools.internal', 7001, false],
    ['fd00::5', 8080, true],
    ['vllm.internal', 8000, true],
    ['a.inference.internal', 9000, true],
    ['a.inference.internal', 443, false],
    // A pattern written as a fully qualified name matches the canonical target.
    ['gateway.internal', 8443, true],
  ])('%s:%i intercepted: %s', (host, port, expected) => {
    expect(intercepted(host, port)).toBe(expected);
  });

  it.each([
    ['api.openai.com', true],
    ['tools.internal', true],
    ['fd00::5', true],
    ['vllm.internal', true],
    ['a.inference.internal', true],
    ['gateway.internal', true],
    ['inference.internal', false],
    ['example.com', false],
  ])('%s named on some port: %s', (host, expected) => {
    expect(intercepted.names(host)).toBe(expected);
  });

  it('refuses a malformed pattern with SVC-SYS-9002 naming its config key', () => {
    let caught: unknown;
    try {
      compileInterceptList({ proxy_intercept_hosts: ['tools.example/path'] });
    } catch (error) {
      caught = error;
    }
    expect(isSvcError(caught) && caught.code).toBe('SVC-SYS-9002');
    expect((caught as Error).message).toContain('proxy_intercept_hosts');
  });
});
