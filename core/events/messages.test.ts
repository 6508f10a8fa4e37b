import { describe, expect, it } from 'vitest';
import { MAX_ID_LENGTH, MAX_METADATA_DEPTH } from '../domain/bounds.ts';
import { EnvelopeOpenedSchema } from '../sync/contract.ts';
import { KEPT_EVIDENCE_ITEMS, KEPT_EXCERPT_LENGTH } from '../policy/result.ts';
import { EnvelopeLifecycleMessageSchema, PolicyViolationMessageSchema, UsageEventMessageSchema } from './messages.ts';

const event = (eventId: string) => ({
  event_id: eventId,
  tenant_id: 'acme',
  envelope_id: 'e1',
  event_type: 'llm.call',
  timestamp: '2026-11-23T10:00:00Z',
  tokens: { input: 1, output: 1 },
});

/** A payload nested `depth` levels deep (the payload itself being the first). */
const payload = (depth: number): unknown => JSON.parse(`{"a":${'['.repeat(depth - 1)}1${']'.repeat(depth - 1)}}`);

const issuePaths = (result: { success: boolean; error?: { issues: Array<{ path: PropertyKey[] }> } }) =>
  result.error?.issues.map((issue) => issue.path.join('.'));

describe('usage event messages', () => {
  it('bound the event id, which becomes a storage key', () => {
    expect(UsageEventMessageSchema.safeParse(event('x'.repeat(MAX_ID_LENGTH))).success).toBe(true);
    const refused = UsageEventMessageSchema.safeParse(event('x'.repeat(MAX_ID_LENGTH + 1)));
    expect(refused.success).toBe(false);
    expect(refused.error?.issues[0]?.path).toEqual(['event_id']);
  });

  it('bound the nesting of the payload, which storage encodes recursively', () => {
    expect(UsageEventMessageSchema.safeParse({ ...event('e'), payload: payload(MAX_METADATA_DEPTH) }).success).toBe(
      true,
    );
    for (const depth of [MAX_METADATA_DEPTH + 1, 20_000]) {
      const refused = UsageEventMessageSchema.safeParse({ ...event('e'), payload: payload(depth) });
      expect(issuePaths(refused)).toEqual(['payload']);
    }
  });
});

describe('envelope messages', () => {
  const opened = {
    tenant_id: 'acme',
    envelope_id: 'e1',
    execution_id: 'x1',
    budget_id: 'b1',
    status: 'AUTHORIZED',
    source: 'proxy:pod-a',
    occurred_at: '2026-11-23T10:00:00Z',
  };
  const ended = { ...opened, status: 'TERMINATED', reason: null };

  it.each([
    ['an opening', EnvelopeOpenedSchema, opened],
    ['a lifecycle change', EnvelopeLifecycleMessageSchema, ended],
  ] as const)('bound the ids of %s, which become storage keys', (_what, schema, message) => {
    const atBound = 'i'.repeat(MAX_ID_LENGTH);
    expect(
      schema.safeParse({ ...message, envelope_id: atBound, execution_id: atBound, budget_id: atBound }).success,
    ).toBe(true);
    expect(schema.safeParse({ ...message, budget_id: null }).success).toBe(true);
    // A proxy passes on the execution id an agent's header named; the processor keys by it only when it is an id.
    expect(schema.safeParse({ ...message, execution_id: 'x'.repeat(5_000) }).success).toBe(true);
    for (const field of ['envelope_id', 'budget_id'])
      for (const id of ['', 'i'.repeat(MAX_ID_LENGTH + 1)])
        expect(issuePaths(schema.safeParse({ ...message, [field]: id })), `${field} of ${id.length}`).toEqual([field]);
  });
});

describe("a proxy's denial with the judge's finding", () => {
  it('keeps the finding shortened as the audit record keeps it, never refusing the denial for it', () => {
    const evidence = Array.from({ length: 1_000 }, (_, i) => ({
      field: `f${i}`.repeat(100),
      start: 0,
      end: 1,
      signal: 'shell.rm_recursive',
      excerpt: 'x'.repeat(100_000),
    }));
    const parsed = PolicyViolationMessageSchema.parse({
      tenant_id: 'acme',
      policy_id: 'p',
      rule_id: 'r',
      denied_action: 'tool:bash',
      decision: 'DENY',
      envelope_id: null,
      message: 'denied',
      occurred_at: new Date().toISOString(),
      source: 'proxy:pod',
      semantic: { judge: 'j'.repeat(5_000), judge_version: '1', category: 'DESTRUCTIVE', confidence: 0.9, evidence },
    });
    expect(parsed.semantic!.evidence).toHaveLength(KEPT_EVIDENCE_ITEMS);
    expect(parsed.semantic!.evidence[0]!.excerpt).toHaveLength(KEPT_EXCERPT_LENGTH);
    expect(parsed.semantic!.evidence[0]!.field.length).toBeLessThanOrEqual(200);
    expect(parsed.semantic!.judge).toHaveLength(200);
    expect(JSON.stringify(parsed).length).toBeLessThan(40_000);
  });
});
