import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../core/config/load.ts';
import { isSvcError } from '../../core/errors/index.ts';
import type { ProviderId } from '../providers/index.ts';
import { keySourcesFromConfig, ProviderCredentials, type KeySource } from './provider-credentials.ts';

const HOSTS: Record<string, ProviderId> = {
  'api.openai.com': 'openai',
  'api.anthropic.com': 'anthropic',
  'generativelanguage.googleapis.com': 'gemini',
  'res.openai.azure.com': 'azure-openai',
  'vllm.internal:8000': 'openai-compatible',
};
const providerOf = (url: URL) => HOSTS[url.host];

const AGENT_HEADERS = () => ({
  authorization: 'Bearer agent-token',
  'x-api-key': 'agent-x',
  'api-key': 'agent-azure',
  'x-goog-api-key': 'agent-goog',
  'content-type': 'application/json',
});

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'provider-keys-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const values = (keys: Partial<Record<ProviderId, string>>): KeySource[] =>
  Object.entries(keys).map(([provider, value]) => ({
    provider: provider as ProviderId,
    key: 'provider_key_openai',
    value,
  }));

describe('ProviderCredentials', () => {
  it.each([
    ['https://api.openai.com/v1/chat/completions', 'authorization', 'Bearer sk-proxy-openai'],
    ['https://vllm.internal:8000/v1/chat/completions', 'authorization', 'Bearer sk-proxy-compatible'],
    ['https://res.openai.azure.com/openai/deployments/x/chat/completions', 'api-key', 'azure-proxy'],
    ['https://api.anthropic.com/v1/messages', 'x-api-key', 'sk-ant-proxy'],
    ['https://generativelanguage.googleapis.com/v1beta/models/g:generateContent', 'x-goog-api-key', 'goog-proxy'],
  ])('sets the proxy key for %s in %s and removes every credential the agent sent', async (url, header, value) => {
    const credentials = await ProviderCredentials.load({
      sources: values({
        openai: 'sk-proxy-openai',
        'openai-compatible': 'sk-proxy-compatible',
        'azure-openai': 'azure-proxy',
        anthropic: 'sk-ant-proxy',
        gemini: 'goog-proxy',
      }),
      providerOf,
    });
    const headers: Record<string, string | string[]> = AGENT_HEADERS();
    credentials.apply(new URL(url), headers, true);
    expect(headers).toEqual({ 'content-type': 'application/json', [header]: value });
  });

  it("strips Gemini's key= query credential and keeps the rest of the query byte for byte", async () => {
    const credentials = await ProviderCredentials.load({ sources: values({ gemini: 'goog-proxy' }), providerOf });
    const url = new URL(
      'https://generativelanguage.googleapis.com/v1beta/models/g:streamGenerateContent?alt=sse&key=agent&k%65y=again&x=a%20b',
    );
    const out = credentials.apply(url, {}, true);
    expect(out.search).toBe('?alt=sse&x=a%20b');
    expect(credentials.apply(new URL('https://generativelanguage.googleapis.com/v1beta/models'), {}, true).search).toBe(
      '',
    );
  });

  it('leaves requests alone for a provider without a key, a host of no provider, and a cleartext public provider', async () => {
    const credentials = await ProviderCredentials.load({
      sources: values({ openai: 'sk-proxy-openai', 'openai-compatible': 'sk-proxy-compatible' }),
      providerOf,
    });
    for (const url of ['https://api.anthropic.com/v1/messages', 'https://example.com/', 'http://api.openai.com/v1/x']) {
      const headers: Record<string, string | string[]> = AGENT_HEADERS();
      expect(credentials.apply(new URL(url), headers, url.startsWith('https:'))).toEqual(new URL(url));
      expect(headers).toEqual(AGENT_HEADERS());
    }
    // An operator-listed compatible server is often plain HTTP inside the cluster.
    const headers: Record<string, string | string[]> = {};
    credentials.apply(new URL('http://vllm.internal:8000/v1/models'), headers, false);
    expect(headers).toEqual({ authorization: 'Bearer sk-proxy-compatible' });
  });

  it('re-reads a key file on reload and keeps the last good key when the file goes bad, never logging a key', async () => {
    const file = join(dir, 'openai');
    await writeFile(file, 'sk-first\n');
    const lines: string[] = [];
    const logger = {
      info: (fields: object, message: string) => lines.push(JSON.stringify({ ...fields, message })),
      warn: (fields: object, message: string) => lines.push(JSON.stringify({ ...fields, message })),
    };
    const credentials = await ProviderCredentials.load({
      sources: [{ provider: 'openai', key: 'provider_key_file_openai', file }],
      providerOf,
      logger,
    });
    const keyNow = () => {
      const headers: Record<string, string | string[]> = {};
      credentials.apply(new URL('https://api.openai.com/v1/models'), headers, true);
      return headers.authorization;
    };
    expect(keyNow()).toBe('Bearer sk-first');
    await writeFile(file, 'sk-second');
    await credentials.reload();
    expect(keyNow()).toBe('Bearer sk-second');
    await writeFile(file, 'sk-third\r\nInjected: header');
    await credentials.reload();
    expect(keyNow()).toBe('Bearer sk-second');
    await rm(file);
    await credentials.reload();
    expect(keyNow()).toBe('Bearer sk-second');
    expect(lines.some((l) => l.includes('provider key reloaded'))).toBe(true);
    expect(lines.filter((l) => l.includes('keeping the last good key'))).toHaveLength(2);
    expect(lines.join('\n')).not.toMatch(/sk-first|sk-second|sk-third/);
  });

  it('refuses at start a missing file or a malformed key with SVC-SYS-9002 naming the key, not its value', async () => {
    const missing = await ProviderCredentials.load({
      sources: [{ provider: 'anthropic', key: 'provider_key_file_anthropic', file: join(dir, 'absent') }],
      providerOf,
    }).catch((e: unknown) => e);
    expect(isSvcError(missing) && missing.code).toBe('SVC-SYS-9002');
    expect((missing as Error).message).toContain('provider_key_file_anthropic');
    const malformed = await ProviderCredentials.load({
      sources: [{ provider: 'gemini', key: 'provider_key_gemini', value: 'secret value\nwith lines' }],
      providerOf,
    }).catch((e: unknown) => e);
    expect(isSvcError(malformed) && malformed.code).toBe('SVC-SYS-9002');
    expect((malformed as Error).message).toContain('provider_key_gemini');
    expect((malformed as Error).message).not.toContain('secret');
  });

  it('reads the sources from the configuration and refuses a file and a value for one provider', () => {
    const config = loadConfig(
      { SVC_PROVIDER_KEY_FILE_AZURE_OPENAI: '/run/keys/azure', SVC_PROVIDER_KEY_ANTHROPIC: 'sk-ant' },
      {},
    );
    expect(keySourcesFromConfig(config)).toEqual([
      { provider: 'anthropic', key: 'provider_key_anthropic', value: 'sk-ant' },
      { provider: 'azure-openai', key: 'provider_key_file_azure_openai', file: '/run/keys/azure' },
    ]);
    let caught: unknown;
    try {
      keySourcesFromConfig(loadConfig({ SVC_PROVIDER_KEY_FILE_OPENAI: '/k', SVC_PROVIDER_KEY_OPENAI: 'v' }, {}));
    } catch (error) {
      caught = error;
    }
    expect(isSvcError(caught) && caught.fieldViolations.map((v) => v.field)).toEqual([
      'provider_key_file_openai',
      'provider_key_openai',
    ]);
  });
});
