import { describe, expect, it } from 'vitest';
import { MAX_ID_LENGTH } from '../domain/bounds.ts';
import { UsageEventMessageSchema } from './messages.ts';

const event = (eventId: string) => ({
  event_id: eventId,
  tenant_id: 'acme',
  envelope_id: 'e1',
  event_type: 'llm.call',
  timestamp: '2026-11-23T10:00:00Z',
  tokens: { input: 1, output: 1 },
});

describe('usage event messages', () => {
  it('bound the event id, which becomes a storage key', () => {
    expect(UsageEventMessageSchema.safeParse(event('x'.repeat(MAX_ID_LENGTH))).success).toBe(true);
    const refused = UsageEventMessageSchema.safeParse(event('x'.repeat(MAX_ID_LENGTH + 1)));
    expect(refused.success).toBe(false);
    expect(refused.error?.issues[0]?.path).toEqual(['event_id']);
  });
});
