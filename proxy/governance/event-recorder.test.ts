import { describe, expect, it } from 'vitest';
import {
  EnvelopeLifecycleMessageSchema,
  PolicyViolationMessageSchema,
  UsageEventMessageSchema,
} from '../../core/events/messages.ts';
import type { OutboxEvent } from '../../core/outbox/outbox-storage.ts';
import type { LocalEnvelope } from '../envelopes/index.ts';
import { EventRecorder, toolNames } from './event-recorder.ts';

const envelope: LocalEnvelope = {
  envelopeId: 'env-1',
  executionId: 'exec-1',
  budgetId: 'budget-1',
  ending: null,
  paused: null,
  inflight: new Set(),
};

function recorder(): { recorder: EventRecorder; written: OutboxEvent[]; failures: unknown[] } {
  const written: OutboxEvent[] = [];
  const failures: unknown[] = [];
  const sink = {
    append: (event: OutboxEvent) => {
      written.push(event);
      return Promise.resolve();
    },
    reserveRoom: () => Promise.resolve(null),
  };
  return {
    recorder: new EventRecorder('acme', 'proxy:pod', sink, { error: (o) => failures.push(o) }),
    written,
    failures,
  };
}

/** Bytes of an event as the outbox stores it. */
const size = (event: OutboxEvent) => Buffer.byteLength(JSON.stringify(event.data));

describe('what the recorder writes of names an agent or a provider chose', () => {
  it('clips a denial whose action and message carry a tool name of 600 KB, and still writes it', async () => {
    const { recorder: r, written } = recorder();
    const action = `tool:${'x'.repeat(600_000)}`;
    await r.violation(envelope, {
      policy_id: 'p',
      rule_id: 'r',
      denied_action: action,
      decision: 'DENY',
      message: `${action} is denied`,
    });
    await r.ended(envelope, 'POLICY_VIOLATION', `${action} is denied`);
    const [violation, ended] = written;
    const denial = PolicyViolationMessageSchema.parse(violation!.data);
    expect(denial.denied_action).toHaveLength(200);
    expect(denial.denied_action.startsWith('tool:xxx')).toBe(true);
    expect(denial.message).toHaveLength(4000);
    expect(EnvelopeLifecycleMessageSchema.parse(ended!.data).reason).toHaveLength(4000);
    expect(written.every((event) => size(event) < 10_000)).toBe(true);
  });

  it("clips the model an answer names, and the answer's tool names, keeping at most 100", async () => {
    const { recorder: r, written } = recorder();
    const names = Array.from({ length: 5_000 }, (_, i) => `${'f'.repeat(1_000)}${i}`);
    await r.usage(envelope, {
      eventType: 'llm.call',
      model: 'm'.repeat(100_000),
      tokens: { input: 1, output: 1 },
      costUsd: 0.01,
      payload: { ...toolNames(names) },
    });
    const usage = UsageEventMessageSchema.parse(written[0]!.data);
    expect(usage.model).toHaveLength(200);
    expect(usage.payload).toMatchObject({ tool_calls_omitted: 4_900 });
    expect((usage.payload as { tool_calls: string[] }).tool_calls).toHaveLength(100);
    expect(size(written[0]!)).toBeLessThan(16 * 1024 + 10_000);
  });

  it('records a call to a model named past the bound under its first characters, never half a surrogate pair, so the control plane charges it', async () => {
    const { recorder: r, written } = recorder();
    const model = `${'m'.repeat(190)}😀${'m'.repeat(300)}`;
    await r.usage(envelope, { eventType: 'llm.call', model, tokens: { input: 1, output: 0 }, costUsd: 1, payload: {} });
    const parsed = UsageEventMessageSchema.parse(written[0]!.data);
    expect(parsed.model!.startsWith('m'.repeat(190))).toBe(true);
    expect(parsed.model!.isWellFormed()).toBe(true);
    expect(parsed.cost_usd).toBe(1);
  });

  it('leaves names within the bounds as they are', () => {
    expect(toolNames(['shell', 'search'])).toEqual({ tool_calls: ['shell', 'search'] });
  });
});
