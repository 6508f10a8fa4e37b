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
  /** Made at the first use: most answers use no hosted tool, and a stream's tally lives as long as it. */
  #ids: Map<string, HostedTool> | undefined;
  #unkept: HostedUses = {};

  /** Counts one sighting; false when it changes nothing (the same use, at the same fee). */
  use(tool: HostedTool, id: string): boolean {
    const ids = (this.#ids ??= new Map());
    if (ids.get(id) === tool) return false;
    if (id.length <= KEPT_ID_CHARS && (ids.has(id) || ids.size < KEPT_IDS)) ids.set(id, tool);
    else this.#unkept[tool] = (this.#unkept[tool] ?? 0) + 1;
    return true;
  }

  get empty(): boolean {
    return (this.#ids?.size ?? 0) === 0 && Object.keys(this.#unkept).length === 0;
  }

  uses(): HostedUses {
    const uses: HostedUses = { ...this.#unkept };
    for (const tool of this.#ids?.values() ?? []) uses[tool] = (uses[tool] ?? 0) + 1;
    return uses;
  }
}
