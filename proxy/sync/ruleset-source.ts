import type { RootDatabase } from 'lmdb';
import type { KeyValueStores, Subscription } from '../../core/bus/bus.ts';
import { compileRuleset, type CompiledRuleset } from '../../core/policy/index.ts';
import { BUCKETS, keys, RulesetSnapshotSchema, type RulesetSnapshot } from '../../core/sync/contract.ts';

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
}

export type RulesetOrigin = 'none' | 'cache' | 'sync';

const DB_NAME = 'ruleset-cache';
const CACHE_KEY = 'snapshot';

/**
 * The tenant's compiled ruleset, kept current by the key-value watch. Each snapshot is compiled
 * once and written to the local cache; a snapshot that does not parse or compile is logged and
 * ignored, so the last good ruleset stays in force.
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
        this.#deps.logger.warn(
          { key, issues: parsed.error.issues.length },
          'ruleset snapshot does not parse; keeping the last one',
        );
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
      this.#deps.logger.info(
        { version: snapshot.version, policies: snapshot.policies.length, origin },
        'ruleset installed',
      );
      return true;
    } catch (error) {
      this.#deps.logger.warn(
        { version: snapshot.version, err: (error as Error).message },
        'ruleset does not compile; keeping the last one',
      );
      return false;
    }
  }
}
