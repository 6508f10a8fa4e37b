import type { HostedTool, HostedUses } from '../../core/metering/prices.ts';

/**
 * Ids of hosted-tool uses kept, and the longest id kept (the providers' are a few dozen
 * characters): past either, each sighting counts as a use of its own, never fewer.
 */
const KEPT_IDS = 4096;
const KEPT_ID_CHARS = 256;

/**
 * The uses of tools a provider bills per use, as an answer shows them: each named by an id (a
 * search call's, a container's), so an id seen again is the same use, billed at the fee its latest
 * reading names (an image's quality, known once it is done).
 */
export class HostedTally {
  readonly #ids = new Map<string, HostedTool>();
  #unkept: HostedUses = {};

  /** Counts one sighting; false when it changes nothing (the same use, at the same fee). */
  use(tool: HostedTool, id: string): boolean {
    if (this.#ids.get(id) === tool) return false;
    if (id.length <= KEPT_ID_CHARS && (this.#ids.has(id) || this.#ids.size < KEPT_IDS)) this.#ids.set(id, tool);
    else this.#unkept[tool] = (this.#unkept[tool] ?? 0) + 1;
    return true;
  }

  get empty(): boolean {
    return this.#ids.size === 0 && Object.keys(this.#unkept).length === 0;
  }

  uses(): HostedUses {
    const uses: HostedUses = { ...this.#unkept };
    for (const tool of this.#ids.values()) uses[tool] = (uses[tool] ?? 0) + 1;
    return uses;
  }
}
