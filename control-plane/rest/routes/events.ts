import { z } from 'zod';
import { IdSchema, MAX_NAME_LENGTH, microsToUsd, TenantIdSchema } from '../../../core/domain/index.ts';
import { UsageEventMessageSchema } from '../../../core/events/messages.ts';
import { eventPages } from '../../events/event-query.ts';
import type { StoredEvent } from '../../storage/records.ts';
import type { Readers } from '../../storage/storage.ts';
import { LimitOrPagingQueryFields, nextPageHeaders, NextPageHeaders, pageOrLimit } from '../paging-query.ts';
import type { RouteTable } from '../route.ts';

const EventsQuery = z.object({
  tenant_id: TenantIdSchema.optional(),
  tenantId: TenantIdSchema.optional(),
  envelope_id: IdSchema.optional(),
  envelopeId: IdSchema.optional(),
  event_type: z.string().max(MAX_NAME_LENGTH).optional(),
  eventType: z.string().max(MAX_NAME_LENGTH).optional(),
  ...LimitOrPagingQueryFields,
});

export const StoredEventSchema = UsageEventMessageSchema.extend({
  cost_usd: z.number().nullable(),
  received_at: z.string(),
});

/** A stored event as REST shows it: its cost in USD. */
export function toRestEvent({ cost_micros, ...event }: StoredEvent): z.infer<typeof StoredEventSchema> {
  return { ...event, cost_usd: microsToUsd(cost_micros) };
}

/** The gateway reference's event query (spec 4.4): the events the event processor stored. */
export function eventRoutes(routes: RouteTable, read: Readers): void {
  routes.add({
    method: 'GET',
    path: '/v1/events',
    operationId: 'listEvents',
    tag: 'events',
    access: 'events:read',
    summary:
      "The tenant's stored events, newest first, a page at a time or up to `limit`, by envelope and event type (`llm.*` selects a family)",
    query: EventsQuery,
    responses: { 200: { description: 'events', schema: z.array(StoredEventSchema), headers: NextPageHeaders } },
    handler: async ({ caller, query }) => {
      const filter = {
        envelopeId: query.envelope_id ?? query.envelopeId,
        eventType: query.event_type ?? query.eventType,
      };
      const page = await pageOrLimit(query, eventPages(read, caller.tenant, filter));
      return { status: 200, body: page.items.map(toRestEvent), headers: nextPageHeaders(page.nextPageToken) };
    },
  });
}
