import { z } from 'zod';
import { DetectionKindSchema, type ImmuneDetection } from '../../core/brain/index.ts';
import { IdSchema, TimestampSchema } from '../../core/domain/index.ts';
import type { PageRequest, Readers } from '../storage/storage.ts';

/** What a detections listing filters by, as both surfaces give it (snake_case names). */
export const DetectionQuerySchema = z
  .object({
    envelope_id: IdSchema.optional(),
    execution_id: IdSchema.optional(),
    kind: DetectionKindSchema.optional(),
    /** Recorded at or after; canonical, as detections store their times, so text order is time order. */
    since: TimestampSchema.optional(),
    /** Recorded before. */
    until: TimestampSchema.optional(),
  })
  .refine((q) => q.since === undefined || q.until === undefined || q.since < q.until, {
    message: 'must be after since',
    path: ['until'],
  });
export type DetectionQuery = z.infer<typeof DetectionQuerySchema>;

export interface DetectionPage {
  detections: ImmuneDetection[];
  /** Empty when this page is the last. */
  next_page_token: string;
}

/** The Immune System's detections of a tenant, newest first (REST and gRPC `ListDetections`). */
export class Detections {
  readonly #read: Readers;

  constructor(read: Readers) {
    this.#read = read;
  }

  /** A page of `page.pageSize` (default 20, at most 100) detections after `page.pageToken`. */
  async list(tenant: string, query: DetectionQuery, page: PageRequest): Promise<DetectionPage> {
    const found = await this.#read.detections.list(
      tenant,
      {
        envelopeId: query.envelope_id,
        executionId: query.execution_id,
        kind: query.kind,
        since: query.since,
        until: query.until,
      },
      page,
    );
    return { detections: found.items, next_page_token: found.nextPageToken ?? '' };
  }
}
