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
import { pageOfScanned, pageStart } from './pages.ts';
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
    // Keyed by the time the control plane recorded each, which `since` and `until` compare with.
    function* untilSince(): Generator<Entry<{ key: string; detection: ImmuneDetection }>> {
      for (const entry of entries) {
        const key = String(entry.id);
        // Newest first: past `since`, nothing older can match.
        if (filter.since !== undefined && key < filter.since) return;
        yield { id: entry.id, value: { key, detection: entry.value } };
      }
    }
    const page = pageOfScanned(
      untilSince(),
      ({ key, detection: d }) =>
        (filter.until === undefined || key < filter.until) &&
        (filter.kind === undefined || d.kind === filter.kind) &&
        (filter.envelopeId === undefined || d.envelope_id === filter.envelopeId) &&
        (filter.executionId === undefined || d.execution_id === filter.executionId),
      size,
    );
    return { items: page.items.map((item) => item.detection), nextPageToken: page.nextPageToken };
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
