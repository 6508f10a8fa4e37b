import type { RootDatabase } from 'lmdb';
import type { KeyValueStores, Subscription } from '../../core/bus/bus.ts';
import { isSvcError } from '../../core/errors/index.ts';
import { compileRuleset, type CompiledRuleset } from '../../core/policy/index.ts';
import { BUCKETS, keys, RulesetSnapshotSchema, type RulesetSnapshot } from '../../core/sync/contract.ts';
import type { RulesetMetrics, RulesetRejection } from '../metrics/index.ts';

export interface RulesetLogger {
  info(object: Record<string, unknown>, message: string): void;
  warn(object: Record<string, unknown>, message: string): void;
}

export interface RulesetSourceDeps {
  tenantId: string;
  keyValue: KeyValueStores;
  /** The proxy's LMDB root: the last snapshot is kept there so a restart enforces it at once. */
  store: RootDatabase;
  logger: RulesetLogger;
  metrics: RulesetMetrics;
}

export type RulesetOrigin = 'none' | 'cache' | 'sync';

const DB_NAME = 'ruleset-cache';
const CACHE_KEY = 'snapshot';

/**
 * The tenant's compiled ruleset, kept current by the key-value watch. Each snapshot is compiled
 * once and written to the local cache; a snapshot that does not parse or compile is refused, so
 * the last good ruleset stays in force, and shows: a warning with its version (never its
 * policies, whose patterns and messages the log need not carry) and
 * `svc_proxy_ruleset_rejected_total`, beside `svc_proxy_ruleset_version` still naming the last.
 */
export class RulesetSource {
  readonly #deps: RulesetSourceDeps;
  readonly #cache;
  #current: CompiledRuleset | null = null;
  #origin: RulesetOrigin = 'none';
  #watch: Subscription | undefined;

  constructor(deps: RulesetSourceDeps) {
    this.#deps = deps;
    this.#cache = deps.store.openDB<RulesetSnapshot, string>({ name: DB_NAME, encoding: 'json' });
    const cached = this.#cache.get(CACHE_KEY);
    if (cached !== undefined) this.#install(cached, 'cache');
  }

  /** The ruleset in force, or null when none was ever received nor cached. */
  get current(): CompiledRuleset | null {
    return this.#current;
  }

  get origin(): RulesetOrigin {
    return this.#origin;
  }

  /** Starts the watch; resolves once the bucket's current value (if any) is applied. */
  async start(): Promise<void> {
    const bucket = await this.#deps.keyValue.open(BUCKETS.rulesets);
    const key = keys.ruleset(this.#deps.tenantId);
    this.#watch = await bucket.watch(key, async (entry) => {
      if (entry.key !== key || entry.operation !== 'PUT') return;
      const parsed = RulesetSnapshotSchema.safeParse(entry.value);
      if (!parsed.success) {
        this.#reject('parse', versionOf(entry.value), { issues: parsed.error.issues.length });
        return;
      }
      if (this.#install(parsed.data, 'sync')) await this.#cache.put(CACHE_KEY, parsed.data);
    });
  }

  async stop(): Promise<void> {
    await this.#watch?.unsubscribe();
    this.#watch = undefined;
  }

  #install(snapshot: RulesetSnapshot, origin: RulesetOrigin): boolean {
    try {
      this.#current = compileRuleset(snapshot.policies, snapshot.version);
      this.#origin = origin;
      this.#deps.metrics.version.set(snapshot.version);
      this.#deps.logger.info(
        { version: snapshot.version, policies: snapshot.policies.length, origin },
        'ruleset installed',
      );
      return true;
    } catch (error) {
      // The error's code or name only: its message may quote a policy's pattern.
      this.#reject('compile', snapshot.version, { error: isSvcError(error) ? error.code : (error as Error).name });
      return false;
    }
  }

  #reject(reason: RulesetRejection, version: number | null, detail: Record<string, unknown>): void {
    this.#deps.metrics.rejected.inc({ reason });
    this.#deps.logger.warn(
      { version, reason, kept_version: this.#current?.version ?? null, ...detail },
      `ruleset snapshot does not ${reason}; keeping the last one`,
    );
  }
}

/** The version a snapshot that does not parse claims, when it claims one. */
function versionOf(value: unknown): number | null {
  const version = (value as { version?: unknown } | null)?.version;
  return typeof version === 'number' ? version : null;
}
