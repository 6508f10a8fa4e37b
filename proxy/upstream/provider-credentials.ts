import { readFile } from 'node:fs/promises';
import type { Config, ConfigKey } from '../../core/config/schema.ts';
import { SvcError } from '../../core/errors/index.ts';
import type { ProviderId } from '../providers/index.ts';

/** Every header a provider reads a credential from; all are removed before the proxy's key is set. */
const CREDENTIAL_HEADERS = ['authorization', 'x-api-key', 'api-key', 'x-goog-api-key'] as const;

const KEY_HEADER: Record<ProviderId, (key: string) => [string, string]> = {
  openai: (key) => ['authorization', `Bearer ${key}`],
  'openai-compatible': (key) => ['authorization', `Bearer ${key}`],
  'azure-openai': (key) => ['api-key', key],
  anthropic: (key) => ['x-api-key', key],
  gemini: (key) => ['x-goog-api-key', key],
};

const CONFIG_KEYS: Record<ProviderId, { file: ConfigKey; value: ConfigKey }> = {
  openai: { file: 'provider_key_file_openai', value: 'provider_key_openai' },
  anthropic: { file: 'provider_key_file_anthropic', value: 'provider_key_anthropic' },
  gemini: { file: 'provider_key_file_gemini', value: 'provider_key_gemini' },
  'azure-openai': { file: 'provider_key_file_azure_openai', value: 'provider_key_azure_openai' },
  'openai-compatible': { file: 'provider_key_file_openai_compatible', value: 'provider_key_openai_compatible' },
};

/** Where one provider's key comes from: a file (re-read while running) or a value. */
export interface KeySource {
  provider: ProviderId;
  /** The config key it was set by, for errors and logs. */
  key: ConfigKey;
  file?: string;
  value?: string;
}

/** The key sources configured; a provider with both a file and a value is refused as ambiguous. */
export function keySourcesFromConfig(config: Config): KeySource[] {
  const sources: KeySource[] = [];
  for (const [provider, keys] of Object.entries(CONFIG_KEYS) as [ProviderId, { file: ConfigKey; value: ConfigKey }][]) {
    const file = config[keys.file] as string | undefined;
    const value = config[keys.value] as string | undefined;
    if (file !== undefined && value !== undefined) {
      const description = `set ${keys.file} or ${keys.value}, not both`;
      throw new SvcError('SVC-SYS-9002', `invalid configuration: ${description}`, { fields: keys.file }, [
        { field: keys.file, description },
        { field: keys.value, description },
      ]);
    }
    if (file !== undefined) sources.push({ provider, key: keys.file, file });
    else if (value !== undefined) sources.push({ provider, key: keys.value, value });
  }
  return sources;
}

/** A key as a header value may carry it: one line of visible ASCII (no header injection). */
function checkedKey(raw: string, source: KeySource): string {
  const key = raw.trim();
  if (/^[\x21-\x7e]+$/.test(key)) return key;
  const where = source.file === undefined ? source.key : `${source.key} (${source.file})`;
  const description = 'must hold the key alone: one line of visible ASCII characters';
  // The message names where the key came from, never the key.
  throw new SvcError('SVC-SYS-9002', `invalid ${where}: ${description}`, { fields: source.key }, [
    { field: source.key, description },
  ]);
}

async function readKey(source: KeySource): Promise<string> {
  if (source.file === undefined) return checkedKey(source.value ?? '', source);
  let text: string;
  try {
    text = await readFile(source.file, 'utf8');
  } catch (error) {
    const description = `cannot read ${source.file}: ${(error as NodeJS.ErrnoException).code ?? 'error'}`;
    throw new SvcError('SVC-SYS-9002', `invalid ${source.key}: ${description}`, { fields: source.key }, [
      { field: source.key, description },
    ]);
  }
  return checkedKey(text, source);
}

export interface CredentialLogger {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}

export interface ProviderCredentialsOptions {
  sources: readonly KeySource[];
  /** The provider a real upstream URL belongs to (by its host), if any. */
  providerOf(url: URL): ProviderId | undefined;
  logger?: CredentialLogger;
}

/**
 * Provider keys held by the proxy and set on upstream requests in the header each provider
 * reads, replacing every credential the agent sent, so an agent needs no key of its own and one
 * that has none can reach a provider only through the proxy. Keys from files are re-read by
 * `reload()` (on an interval and on SIGHUP), so a rotated Secret takes effect without a restart;
 * a file that cannot be read then keeps the last good key. Keys never appear in logs or errors.
 */
export class ProviderCredentials {
  readonly #options: ProviderCredentialsOptions;
  readonly #keys = new Map<ProviderId, string>();

  private constructor(options: ProviderCredentialsOptions) {
    this.#options = options;
  }

  /** Reads every key once; a missing or malformed one stops start-up with SVC-SYS-9002. */
  static async load(options: ProviderCredentialsOptions): Promise<ProviderCredentials> {
    const credentials = new ProviderCredentials(options);
    for (const source of options.sources) credentials.#keys.set(source.provider, await readKey(source));
    return credentials;
  }

  /** Providers whose key the proxy holds. */
  get providers(): ProviderId[] {
    return [...this.#keys.keys()];
  }

  /**
   * Sets the proxy's key for the provider of `url` on `headers` (lower-case names) after removing
   * every credential header, and returns the URL without a `key=` query credential (Gemini).
   * `secure` says the key would travel over TLS or to an operator-configured destination; an
   * OpenAI-compatible server (operator-listed, often plain HTTP inside the cluster) needs neither.
   * Returns `url` itself when nothing applies.
   */
  apply(url: URL, headers: Record<string, string | string[]>, secure: boolean): URL {
    const provider = this.#options.providerOf(url);
    const key = provider === undefined ? undefined : this.#keys.get(provider);
    if (provider === undefined || key === undefined) return url;
    if (!secure && provider !== 'openai-compatible') return url;
    for (const name of CREDENTIAL_HEADERS) delete headers[name];
    const [name, value] = KEY_HEADER[provider](key);
    headers[name] = value;
    return provider === 'gemini' ? withoutKeyParameter(url) : url;
  }

  /** Re-reads the key files; a changed key is used from the next request on. */
  async reload(): Promise<void> {
    const logger = this.#options.logger;
    for (const source of this.#options.sources) {
      if (source.file === undefined) continue;
      try {
        const key = await readKey(source);
        if (key === this.#keys.get(source.provider)) continue;
        this.#keys.set(source.provider, key);
        logger?.info({ provider: source.provider, file: source.file }, 'provider key reloaded');
      } catch (error) {
        logger?.warn(
          { provider: source.provider, file: source.file, err: (error as Error).message },
          'provider key file unreadable; keeping the last good key',
        );
      }
    }
  }

  /** Re-reads the files every `intervalMs`; returns the function that stops it. */
  reloadEvery(intervalMs: number): () => void {
    if (intervalMs <= 0 || !this.#options.sources.some((s) => s.file !== undefined)) return () => undefined;
    const timer = setInterval(() => void this.reload(), intervalMs);
    timer.unref();
    return () => clearInterval(timer);
  }
}

/** The URL without its `key` query parameters, the rest of the query kept byte for byte. */
function withoutKeyParameter(url: URL): URL {
  if (url.search === '') return url;
  const kept = url.search
    .slice(1)
    .split('&')
    .filter((pair) => {
      const name = pair.split('=')[0] ?? '';
      try {
        return decodeURIComponent(name.replaceAll('+', ' ')) !== 'key';
      } catch {
        return true;
      }
    });
  const next = new URL(url.href);
  next.search = kept.length > 0 ? `?${kept.join('&')}` : '';
  return next;
}
