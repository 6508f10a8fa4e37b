import { describe, expect, it } from 'vitest';
import { isSvcError } from '../../core/errors/index.ts';
import { parseMcpServers } from '../mcp/index.ts';
import { parseNameUrlList } from './name-url-list.ts';
import { parseUpstreamOverrides } from './overrides.ts';

function failure(run: () => unknown): { code: string; field: string | undefined; message: string } | undefined {
  try {
    run();
  } catch (error) {
    if (isSvcError(error)) return { code: error.code, field: error.fieldViolations[0]?.field, message: error.message };
    throw error;
  }
  return undefined;
}

describe('one name=url list parser', () => {
  const rule = { label: 'name', pattern: /^[a-z]+$/ };

  it('reads entries in order, trimming spaces and skipping empty ones', () => {
    expect(parseNameUrlList(' a=http://x:1 ,, b=https://y/p ', 'k', rule).map((e) => [e.name, e.url.href])).toEqual([
      ['a', 'http://x:1/'],
      ['b', 'https://y/p'],
    ]);
  });

  it('refuses a name given twice, whatever its case, naming the key', () => {
    expect(failure(() => parseNameUrlList('a=http://x,a=http://y', 'k', rule))).toMatchObject({
      code: 'SVC-SYS-9002',
      field: 'k',
      message: expect.stringContaining('"a" appears more than once') as string,
    });
    expect(failure(() => parseUpstreamOverrides('API.openai.com=http://x,api.OpenAI.com=http://y'))?.field).toBe(
      'upstream_overrides',
    );
  });

  it('serves both MCP servers and upstream overrides, each with its own name rule', () => {
    expect(failure(() => parseMcpServers('bad name=http://x'))?.field).toBe('proxy_mcp_servers');
    expect(failure(() => parseUpstreamOverrides('host:443=http://x'))?.message).toContain('host=http(s)://target');
    expect(parseMcpServers('tools=http://127.0.0.1:9/mcp').reverseRoutes).toEqual({
      '/mcp/tools': 'http://127.0.0.1:9',
    });
  });
});
