import type { Database, RootDatabase } from 'lmdb';
import { z } from 'zod';
import { writeInBackground, type StoreLogger } from '../store/index.ts';

/**
 * The Immune System's hold on the whole sidecar: paused with the envelope whose resumption lifts
 * it (`anchor`; null while the one it rode on ended and no other has been met yet), or terminated.
 */
export const SidecarHoldSchema = z.discriminatedUnion('state', [
  z.object({
    state: z.literal('paused'),
    anchor: z.string().nullable(),
    /** The anomaly's kind (`immune.anomaly` payload), reported again when the pause moves. */
    kind: z.enum(['call_rate', 'spend']),
    reason: z.string(),
    /** The last anchor that ended rather than being resumed: the one the report of a move names. */
    ended: z.string().nullable(),
  }),
  z.object({ state: z.literal('terminated'), reason: z.string() }),
]);
export type SidecarHold = z.infer<typeof SidecarHoldSchema>;

const DB_NAME = 'sidecar-state';
const KEY = 'sidecar';

/** Why a kept state that does not parse terminates the sidecar: it may have been either. */
const UNREADABLE = 'the sidecar state kept in the data directory does not parse';

/**
 * Whether the whole sidecar is paused or terminated, shared by the pause holds and the envelope
 * registry. Nothing lifts a termination. `keep` hears every change, to write it where a restart
 * reads it (`keptSidecarState`).
 */
export class SidecarState {
  #current: SidecarHold | null;
  readonly #keep: (hold: SidecarHold | null) => void;

  constructor(initial: SidecarHold | null = null, keep: (hold: SidecarHold | null) => void = () => undefined) {
    this.#current = initial;
    this.#keep = keep;
  }

  get current(): SidecarHold | null {
    return this.#current;
  }

  /** Records the hold (null: running); false when the sidecar is terminated. */
  set(hold: SidecarHold | null): boolean {
    if (this.#current?.state === 'terminated') return false;
    this.#current = hold;
    this.#keep(hold);
    return true;
  }
}

/** The kept state; one that cannot be decoded or parsed reads as terminated. */
function readKept(db: Database<unknown, string>): SidecarHold | null {
  let kept: unknown;
  try {
    kept = db.get(KEY);
  } catch {
    return { state: 'terminated', reason: UNREADABLE };
  }
  if (kept === undefined) return null;
  const parsed = SidecarHoldSchema.safeParse(kept);
  return parsed.success ? parsed.data : { state: 'terminated', reason: UNREADABLE };
}

/**
 * The sidecar's state kept in the proxy's LMDB store beside the envelope holds, so that a
 * restarted proxy is still paused or terminated: the agent names its executions itself, and a
 * restart would otherwise let every one of them run again. A termination is kept until the data
 * directory is replaced (a new pod); a kept value that does not parse reads as terminated.
 */
export function keptSidecarState(store: RootDatabase, logger: StoreLogger): SidecarState {
  const db = store.openDB<unknown, string>({ name: DB_NAME, encoding: 'json' });
  const initial = readKept(db);
  return new SidecarState(initial, (hold) => {
    // The copy in memory is in force whatever becomes of the one on disk, which serves a restart.
    writeInBackground(
      hold === null ? db.remove(KEY) : db.put(KEY, hold),
      logger,
      { sidecar_state: hold?.state ?? 'running' },
      "the sidecar's state was not kept on disk: a restart would not know it",
    );
  });
}
