import type { ImmuneDetection } from '../../../core/brain/immune/detection.ts';
import {
  detectionKey,
  type DetectionFilter,
  type DetectionRepository,
  type Page,
  type PageRequest,
} from '../storage.ts';
import type { Entry, KvView } from './kv.ts';
import type { Layout } from './layout.ts';
import { pageOf, pageStart } from './pages.ts';
import type { Sync } from './promised.ts';

/**
 * Detections under `[tenant, 'detection', '<recorded_at>/<detection_id>']`, so that key order is
 * time order, and their ids under `[tenant, 'detection_id', detection_id]` (a replay is refused).
 * Times are compared on the key, as PostgreSQL compares its `sort_key`.
 */
export class LmdbDetections implements Sync<DetectionRepository> {
  readonly #kv: KvView;
  readonly #layout: Layout;

  constructor(kv: KvView, layout: Layout) {
    this.#kv = kv;
    this.#layout = layout;
  }

  list(tenant: string, filter: DetectionFilter, request?: PageRequest): Page<ImmuneDetection> {
    const { size, after } = pageStart(request);
    const entries = this.#kv.range<ImmuneDetection>(this.#layout.tenant(tenant, 'detection'), { reverse: true, after });
    function* matching(): Generator<Entry<ImmuneDetection>> {
      for (const entry of entries) {
        const d = entry.value;
        const key = String(entry.id);
        // Newest first: past `since`, nothing older can match.
        if (filter.since !== undefined && key < filter.since) return;
        if (filter.until !== undefined && key >= filter.until) continue;
        if (filter.kind !== undefined && d.kind !== filter.kind) continue;
        if (filter.envelopeId !== undefined && d.envelope_id !== filter.envelopeId) continue;
        if (filter.executionId !== undefined && d.execution_id !== filter.executionId) continue;
        yield entry;
      }
    }
    return pageOf(matching(), size);
  }

  removeDetectedBefore(tenant: string, before: string, limit: number): number {
    const space = this.#layout.tenant(tenant, 'detection');
    const doomed: Entry<ImmuneDetection>[] = [];
    for (const entry of this.#kv.range<ImmuneDetection>(space)) {
      if (doomed.length >= limit || String(entry.id) >= before) break;
      doomed.push(entry);
    }
    // Removed after the walk: the range reads the staged view, which these removals change.
    for (const { id, value } of doomed) {
      this.#kv.remove(space, id);
      this.#kv.remove(this.#layout.tenant(tenant, 'detection_id'), value.detection_id);
    }
    return doomed.length;
  }

  insert(tenant: string, detection: ImmuneDetection): boolean {
    const ids = this.#layout.tenant(tenant, 'detection_id');
    if (this.#kv.get(ids, detection.detection_id) !== undefined) return false;
    const key = detectionKey(detection);
    this.#kv.put(ids, detection.detection_id, key);
    this.#kv.put(this.#layout.tenant(tenant, 'detection'), key, detection);
    return true;
  }
}
