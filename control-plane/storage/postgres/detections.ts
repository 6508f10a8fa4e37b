import type { ImmuneDetection } from '../../../core/brain/immune/detection.ts';
import {
  detectionKey,
  type DetectionFilter,
  type DetectionRepository,
  type Page,
  type PageRequest,
} from '../storage.ts';
import { pageOf, pageStart } from './pages.ts';
import type { Sql } from './sql.ts';

interface Row {
  sort_key: string;
  doc: ImmuneDetection;
}

/** Detections keyed by tenant and detection id, listed by `sort_key` (`<recorded_at>/<detection_id>`). */
export class PgDetections implements DetectionRepository {
  readonly #sql: Sql;

  constructor(sql: Sql) {
    this.#sql = sql;
  }

  async list(tenant: string, filter: DetectionFilter, request?: PageRequest): Promise<Page<ImmuneDetection>> {
    const { size, after } = pageStart<string>(request, 'string');
    const { rows } = await this.#sql.query<Row>(
      `SELECT sort_key, doc FROM detections WHERE tenant_id = $1 AND ($2::text IS NULL OR sort_key < $2)
         AND ($3::text IS NULL OR envelope_id = $3) AND ($4::text IS NULL OR execution_id = $4)
         AND ($5::text IS NULL OR kind = $5) AND ($6::text IS NULL OR sort_key >= $6)
         AND ($7::text IS NULL OR sort_key < $7)
       ORDER BY sort_key DESC LIMIT $8`,
      [
        tenant,
        after,
        filter.envelopeId ?? null,
        filter.executionId ?? null,
        filter.kind ?? null,
        filter.since ?? null,
        filter.until ?? null,
        size + 1,
      ],
    );
    return pageOf(
      rows,
      size,
      (r) => r.sort_key,
      (r) => r.doc,
    );
  }

  async removeDetectedBefore(tenant: string, before: string, limit: number): Promise<number> {
    // `<recorded_at>/<id>` sorts below `before` exactly when the detection is older: the time index
    // bounds the walk to the oldest `limit` rows.
    const { rowCount } = await this.#sql.query(
      `DELETE FROM detections WHERE tenant_id = $1 AND sort_key IN (
         SELECT sort_key FROM detections WHERE tenant_id = $1 AND sort_key < $2 ORDER BY sort_key LIMIT $3
       )`,
      [tenant, before, limit],
    );
    return rowCount ?? 0;
  }

  async insert(tenant: string, detection: ImmuneDetection): Promise<boolean> {
    const { rowCount } = await this.#sql.query(
      `INSERT INTO detections (tenant_id, detection_id, sort_key, kind, envelope_id, execution_id, doc)
       VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`,
      [
        tenant,
        detection.detection_id,
        detectionKey(detection),
        detection.kind,
        detection.envelope_id,
        detection.execution_id,
        JSON.stringify(detection),
      ],
    );
    return rowCount === 1;
  }
}
