import { z } from 'zod';
import { IdSchema, MAX_NAME_LENGTH, microsToUsd, TenantIdSchema } from '../../../core/domain/index.ts';
import { UsageEventMessageSchema } from '../../../core/events/messages.ts';
import { queryEvents } from '../../events/event-query.ts';
import type { Readers } from '../../storage/storage.ts';
import type { RouteTable } from '../route.ts';

const EventsQuery = z.object({
  tenant_id: TenantIdSchema.optional(),
  tenantId: TenantIdSchema.optional(),
  envelope_id: IdSchema.optional(),
  envelopeId: IdSchema.optional(),
  event_type: z.string().max(MAX_NAME_LENGTH).optional(),
  eventType: z.string().max(MAX_NAME_LENGTH).optional(),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
});

const StoredEventSchema = UsageEventMessageSchema.extend({ cost_usd: z.number().nullable(), received_at: z.string() });

/** The gateway reference's event query (spec 4.4): the events the event processor stored. */
export function eventRoutes(routes: RouteTable, read: Readers): void {
  routes.add({
    method: 'GET',
    path: '/v1/events',
    operationId: 'listEvents',
    tag: 'events',
    access: 'events:read',
    summary: "The tenant's stored events, newest first, by envelope and event type (`llm.*` selects a family)",
    query: EventsQuery,
    responses: { 200: { description: 'events', schema: z.array(StoredEventSchema) } },
    handler: async ({ caller, query }) => ({
      status: 200,
      body: (
        await queryEvents(read, caller.tenant, {
          envelopeId: query.envelope_id ?? query.envelopeId,
          eventType: query.event_type ?? query.eventType,
          limit: query.limit,
        })
      ).map(({ cost_micros, ...event }) => ({ ...event, cost_usd: microsToUsd(cost_micros) })),
    }),
  });
}
