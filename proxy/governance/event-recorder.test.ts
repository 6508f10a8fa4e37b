import { describe, expect, it } from 'vitest';
import {
  EnvelopeLifecycleMessageSchema,
  PolicyViolationMessageSchema,
  UsageEventMessageSchema,
} from '../../core/events/messages.ts';
import type { OutboxEvent } from '../../core/outbox/outbox-storage.ts';
import type { LocalEnvelope } from '../envelopes/index.ts';
import { EventRecorder, toolNames, type UsageRecord } from './event-recorder.ts';

const envelope: LocalEnvelope = {
  envelopeId: 'env-1',
  executionId: 'exec-1',
  budgetId: 'budget-1',
  ending: null,
  paused: null,
  inflight: new Set(),
};

/** `committed`: what the store's provisional writes wait for before they land. */
function recorder(
  provisional = new Map<string, OutboxEvent>(),
  committed: Promise<void> = Promise.resolve(),
): {
  recorder: EventRecorder;
  written: OutboxEvent[];
  provisional: Map<string, OutboxEvent>;
  failures: unknown[];
} {
  const written: OutboxEvent[] = [];
  const failures: unknown[] = [];
  const sink = {
    append: (event: OutboxEvent) => {
      written.push(event);
      return Promise.resolve();
    },
    reserveRoom: () => Promise.resolve(null),
  };
  // The proxy's store keeps these across a restart: handing the same map to a new recorder is one.
  const store = {
    put: (event: OutboxEvent) => committed.then(() => void provisional.set(event.id, event)),
    remove: (id: string) => Promise.resolve(void provisional.delete(id)),
    all: () => [...provisional.values()],
  };
  return {
    recorder: new EventRecorder('acme', 'proxy:pod', sink, store, { error: (o) => failures.push(o) }),
    written,
    provisional,
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

describe('a provisional usage event', () => {
  const call = (output: number): UsageRecord => ({
    eventType: 'llm.call',
    model: 'gpt-4o-mini',
    tokens: { input: 10, output },
    costUsd: output / 1e6,
    payload: { request_id: 'r-1' },
  });
  const tokensOf = (event: OutboxEvent) => UsageEventMessageSchema.parse(event.data).tokens;

  it('is kept unpublished, then replaced by the final event of the same id, which is written once', async () => {
    const { recorder: r, written, provisional } = recorder();
    await r.provisional(envelope, call(4096), 'call-1');
    expect(written).toEqual([]);
    expect([...provisional.values()].map(tokensOf)).toEqual([{ input: 10, output: 4096 }]);
    await r.usage(envelope, call(40), undefined, 'call-1');
    expect(written.map(tokensOf)).toEqual([{ input: 10, output: 40 }]);
    expect(written[0]!.id).toBe('event:acme:call-1');
    expect(provisional.size).toBe(0);
  });

  it('still being written when the final event is recorded, is waited for, then replaced', async () => {
    const commit = Promise.withResolvers<void>();
    const { recorder: r, written, provisional } = recorder(new Map(), commit.promise);
    const held = r.provisional(envelope, call(4096), 'call-2');
    const final = r.usage(envelope, call(40), undefined, 'call-2');
    await new Promise((resolve) => setImmediate(resolve));
    // Written before the provisional event lands, the final one would be followed by it, kept.
    expect(written).toEqual([]);
    commit.resolve();
    await Promise.all([held, final]);
    expect(written.map(tokensOf)).toEqual([{ input: 10, output: 40 }]);
    expect(provisional.size).toBe(0);
  });

  it('is published by the next start when the process ended before the final event', async () => {
    const kept = new Map<string, OutboxEvent>();
    await recorder(kept).recorder.provisional(envelope, call(4096), 'call-3');
    const { recorder: next, written } = recorder(kept);
    await next.releaseProvisional();
    expect(written.map((event) => [event.id, tokensOf(event)])).toEqual([
      ['event:acme:call-3', { input: 10, output: 4096 }],
    ]);
    expect(kept.size).toBe(0);
  });

  it('once released (the proxy closing mid-drain), stands: the final event is not written after it', async () => {
    const { recorder: r, written, provisional } = recorder();
    await r.provisional(envelope, call(4096), 'call-4');
    await r.releaseProvisional();
    await r.usage(envelope, call(40), undefined, 'call-4');
    expect(written.map(tokensOf)).toEqual([{ input: 10, output: 4096 }]);
    expect(provisional.size).toBe(0);
  });

  it('withdrawn (the call not charged after all), is removed once written, and nothing is published', async () => {
    const commit = Promise.withResolvers<void>();
    const { recorder: r, written, provisional } = recorder(new Map(), commit.promise);
    void r.provisional(envelope, call(4096), 'call-5');
    r.withdraw('call-5');
    r.withdraw('call-unknown');
    commit.resolve();
    await r.written();
    expect(provisional.size).toBe(0);
    await r.releaseProvisional();
    expect(written).toEqual([]);
  });
});
