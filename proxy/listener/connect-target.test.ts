import { describe, expect, it } from 'vitest';
import { isSvcError } from '../../core/errors/index.ts';
import { interceptedOrigin, parseConnectTarget } from './connect-target.ts';

describe('parseConnectTarget', () => {
  it('reads host and port, IPv6 included, defaulting to 443', () => {
    expect(parseConnectTarget('api.openai.com:443')).toEqual({ host: 'api.openai.com', port: 443 });
    expect(parseConnectTarget('example.com:80')).toEqual({ host: 'example.com', port: 80 });
    expect(parseConnectTarget('[::1]:8443')).toEqual({ host: '::1', port: 8443 });
    expect(parseConnectTarget('example.com')).toEqual({ host: 'example.com', port: 443 });
  });

  it('drops the trailing dot of a fully qualified name, and reads the name in lower case', () => {
    expect(parseConnectTarget('api.openai.com.:443')).toEqual({ host: 'api.openai.com', port: 443 });
    expect(parseConnectTarget('API.OpenAI.com..')).toEqual({ host: 'api.openai.com', port: 443 });
  });

  it.each(['', 'a/b:443', 'user@host:443', 'host:99999', '.:443'])('refuses %j with SVC-SYS-9002', (authority) => {
    let caught: unknown;
    try {
      parseConnectTarget(authority);
    } catch (error) {
      caught = error;
    }
    expect(isSvcError(caught) && caught.code).toBe('SVC-SYS-9002');
  });
});

describe('interceptedOrigin', () => {
  it('omits the default port and brackets IPv6', () => {
    expect(interceptedOrigin({ host: 'api.openai.com', port: 443 })).toBe('https://api.openai.com');
    expect(interceptedOrigin({ host: '::1', port: 8443 })).toBe('https://[::1]:8443');
    expect(interceptedOrigin({ host: 'tools.internal', port: 80 }, false)).toBe('http://tools.internal');
    expect(interceptedOrigin({ host: 'tools.internal', port: 443 }, false)).toBe('http://tools.internal:443');
  });
});
