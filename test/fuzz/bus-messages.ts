import fc from 'fast-check';
import {
  MAX_ID_LENGTH,
  MAX_METADATA_DEPTH,
  MAX_TEXT_LENGTH,
  MAX_TOKEN_TOTAL,
  MAX_TOTAL,
} from '../../core/domain/bounds.ts';
import { PRICED_MODEL, UNKNOWN_MODEL_RATE, type TenantIds } from './bus-target.ts';

/**
 * Generated bus messages for the subjects the control plane consumes, each with its fate: what
 * the control plane must make of it, known from how it was generated (never from the product's
 * own schemas). Valid messages, valid-but-odd ones, and broken ones made by one known mutation of
 * a valid message, or raw bytes. What the control plane keeps of a string is its well-formed form:
 * a payload's text is read as Unicode, an unpaired surrogate becoming U+FFFD (core/bus/codec.ts).
 */

export type Consumer = 'event-processor' | 'envelope-opener' | 'envelope-terminator' | 'violation-auditor';

export interface Totals {
  tokens_input: number;
  tokens_output: number;
  cost_micros: number;
  llm_calls: number;
  tool_calls: number;
}

export interface UsageFacts {
  eventId: string;
  envelopeId: string;
  budgetId: string | null;
  /** Sent by a proxy (`source` proxy:…): its own budget is charged, whatever its envelope's. */
  fromProxy: boolean;
  charge: Totals;
}

export type Fate =
  | { kind: 'usage'; event: UsageFacts }
  | { kind: 'opened'; envelopeId: string; budgetId: string | null; adapterType: string; source: string }
  /** Valid on `envelopes.created` and changes nothing: the shape of the control plane's own announcements. */
  | { kind: 'announced' }
  | { kind: 'ended'; envelopeId: string; budgetId: string | null; status: string }
  | { kind: 'violation'; audited: boolean }
  /** Does not validate: set aside by its consumer. */
  | { kind: 'refused' }
  /** Is not JSON: set aside by the bus before any consumer sees it. */
  | { kind: 'undecodable' };

export interface Draft {
  subject: string;
  bytes: Uint8Array;
  fate: Fate;
  /** What was generated and, for a broken one, why it is; briefly, for failure messages. */
  label: string;
  /** A msg id far longer than any storage key. */
  longMsgId: boolean;
}

export interface GeneratedBatch {
  drafts: Draft[];
  /** Copies of earlier drafts published again: with the same msg id (JetStream drops it) or a new one. */
  replays: Array<{ of: number; at: number; sameMsgId: boolean }>;
  /** Every draft is broken: the batch must change nothing at all. */
  brokenOnly: boolean;
}

const encoder = new TextEncoder();
const json = (value: unknown): Uint8Array => encoder.encode(JSON.stringify(value));

export const TERMINATED_STATUSES = ['TERMINATED', 'BUDGET_EXCEEDED', 'POLICY_VIOLATION', 'TIMEOUT'] as const;
const STATUSES = ['PENDING', 'AUTHORIZED', 'RUNNING', 'PAUSED', 'COMPLETED', 'FAILED', ...TERMINATED_STATUSES];

/** Strings that have broken parsers, key encodings and logs before: control, combining, bidi, astral, surrogate halves. */
const ODD_TEXT = [
  '\u0000',
  'a\u0000b',
  'e\u0301',
  '\u202eevil',
  '\u200b',
  '\ufeff',
  '\uffff',
  '😀',
  '𝔘𝔫𝔦',
  '\ud800',
  '\udfff',
  'a\ud83d',
  '中文',
  'ünï',
  ' ',
  '%2F..',
  '../..',
  '"q"',
  '\\',
  '\n\r\t',
];

const oddText = fc.oneof(
  fc.constantFrom(...ODD_TEXT),
  fc.string({ unit: 'binary', minLength: 1, maxLength: 12 }),
  fc.string({ unit: 'grapheme', minLength: 1, maxLength: 12 }),
);

/** Characters outside the Basic Multilingual Plane, which sort after every key bound written as U+FFFF. */
const ASTRAL = ['😀', '𝔘', '\u{10fffd}'];

/** An id within the bus bound: plain, odd, starting with an astral character, or right at the bound. */
function idLike(prefix: string, pool: number): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 6, arbitrary: fc.nat(pool).map((n) => `${prefix}${n}`) },
    { weight: 2, arbitrary: oddText.map((s) => `${prefix}${s}`) },
    { weight: 1, arbitrary: fc.tuple(fc.constantFrom(...ASTRAL), fc.nat(pool)).map(([a, n]) => `${a}${prefix}${n}`) },
    {
      weight: 1,
      arbitrary: fc.integer({ min: 0, max: 20 }).map((n) => `${prefix}${n}-`.padEnd(MAX_ID_LENGTH, 'x')),
    },
  );
}

/**
 * Valid timestamps, far past and far future included. The dates leave a day at either end, so
 * that an offset never takes one out of the years 0000-9999, which are refused.
 */
const timestamp = fc.oneof(
  fc.constant(new Date().toISOString()),
  fc
    .date({ min: new Date('0001-01-01T00:00:00Z'), max: new Date('9999-12-30T23:59:59.999Z'), noInvalidDate: true })
    .chain((d) =>
      fc.constantFrom(
        d.toISOString(),
        d.toISOString().replace(/\.\d{3}Z$/, 'Z'),
        d.toISOString().replace('Z', '+14:00'),
        d.toISOString().replace('Z', '-12:00'),
        d.toISOString().replace('Z', '+05:30'),
      ),
    ),
  fc.constantFrom(
    '0000-01-01T00:00:00Z',
    '9999-12-31T23:59:59.999999999Z',
    '1970-01-01T00:00:00Z',
    '2024-02-29T12:00:00Z',
  ),
);

const BAD_TIMESTAMPS = [
  'yesterday',
  '',
  '2024-13-01T00:00:00Z',
  '2023-02-29T00:00:00Z',
  '2024-01-01',
  '2024-01-01T00:00:00',
  '2024-01-01 00:00:00Z',
  '+275760-09-13T00:00:00.000Z',
  '2024-01-01T24:00:00Z',
  '2024-01-01T00:00:00+99:00',
  '9999-12-31T23:59:59-00:01',
  '0000-01-01T00:00:00+00:01',
];

/** Small JSON, as a proxy's payload may carry. */
const smallJson = fc.jsonValue({ maxDepth: 3 });

/** A JSON text nested `depth` deep (depth 1: a flat object), built as text so no encoder recurses. */
function nestedText(depth: number): string {
  return `{"nested":${'['.repeat(depth - 1)}1${']'.repeat(depth - 1)}}`;
}

/** A charge in whole micro-dollars: the nearest, but a positive one never rounds to nothing. */
const wholeMicros = (micros: number): number => (micros > 0 ? Math.max(1, Math.round(micros)) : Math.round(micros));

/**
 * USD per million tokens is pico-dollars per token times 10^-6; a price is rounded to the
 * micro-dollar, at least one when it is anything.
 */
const priced = (inputPerMillion: number, outputPerMillion: number, input: number, output: number): number =>
  wholeMicros((input * Math.round(inputPerMillion * 1e6) + output * Math.round(outputPerMillion * 1e6)) / 1_000_000);

/** The rule of apply-usage: the reported cost, else the price of the model, else nothing; at most MAX_TOTAL. */
function costMicros(costUsd: number | null, model: string | null, tokens: { input: number; output: number }): number {
  if (costUsd !== null) return Math.min(MAX_TOTAL, wholeMicros(costUsd * 1_000_000));
  if (model === null) return 0;
  const rate = model === PRICED_MODEL.id ? PRICED_MODEL : UNKNOWN_MODEL_RATE;
  return Math.min(MAX_TOTAL, priced(rate.inputPerMillion, rate.outputPerMillion, tokens.input, tokens.output));
}

export function zeroTotals(): Totals {
  return { tokens_input: 0, tokens_output: 0, cost_micros: 0, llm_calls: 0, tool_calls: 0 };
}

/** Totals plus a charge, as apply-usage keeps them: token totals and cost stop at their maximum. */
export function addTotals(a: Totals, b: Totals): Totals {
  return {
    tokens_input: Math.min(MAX_TOKEN_TOTAL, a.tokens_input + b.tokens_input),
    tokens_output: Math.min(MAX_TOKEN_TOTAL, a.tokens_output + b.tokens_output),
    cost_micros: Math.min(MAX_TOTAL, a.cost_micros + b.cost_micros),
    llm_calls: a.llm_calls + b.llm_calls,
    tool_calls: a.tool_calls + b.tool_calls,
  };
}

const tokenCount = fc.oneof(
  { weight: 6, arbitrary: fc.nat(5_000) },
  { weight: 2, arbitrary: fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }) },
  { weight: 1, arbitrary: fc.constantFrom(0, Number.MAX_SAFE_INTEGER, MAX_TOKEN_TOTAL, 2 ** 52, 100_000_000) },
);
/** Tokens of an event priced by model: bounded so the expected price is exact integer arithmetic. */
const pricedTokenCount = fc.oneof(fc.nat(5_000), fc.integer({ min: 0, max: 100_000_000 }));

const costUsd = fc.oneof(
  { weight: 4, arbitrary: fc.double({ min: 0, max: 10, noNaN: true }) },
  { weight: 2, arbitrary: fc.double({ min: 0, max: Number.MAX_VALUE, noNaN: true, noDefaultInfinity: true }) },
  { weight: 1, arbitrary: fc.constantFrom(0, 1e-9, 0.0000005, 0.0000015, 1e6, 1e300, Number.MAX_VALUE, 5e-324) },
);

const EVENT_SUBJECTS = [
  'llm.call',
  'llm.stream',
  'tool.invoke',
  'tool.result',
  'checkpoint.saved',
  'custom.thing',
] as const;

interface Valid {
  suffix: string;
  body: Record<string, unknown>;
  fate: Fate;
  label: string;
  /** Keys whose absence the schema refuses. */
  required: string[];
  /** Keys holding ids that become storage keys. */
  ids: string[];
  /** Keys holding timestamps. */
  times: string[];
  /** A wrong-typed value per key. */
  wrong: Record<string, unknown[]>;
}

const STRING_WRONG = [5, true, [], {}];

/** What an agent's header may have named: an id, or anything (the processor then keys by the envelope's id). */
const executionId = fc.oneof(
  { weight: 4, arbitrary: fc.uuid() },
  { weight: 4, arbitrary: idLike('x-', 1_000) },
  { weight: 1, arbitrary: fc.constantFrom('', 'x'.repeat(MAX_ID_LENGTH + 1), 'x'.repeat(3_000)) },
);

function usage(home: TenantIds, other: TenantIds): fc.Arbitrary<Valid> {
  const envelopes = home.envelopes;
  const envelopeId = fc.oneof(
    {
      weight: 5,
      arbitrary: fc.constantFrom(
        envelopes.e1,
        envelopes.e2,
        envelopes.e3,
        envelopes.e4,
        envelopes.capped,
        envelopes.loose,
      ),
    },
    { weight: 4, arbitrary: idLike('u-', 40) },
    // Another tenant's envelope is unknown here.
    { weight: 1, arbitrary: fc.constant(other.envelopes.e1) },
  );
  const budgetId = fc.oneof(
    fc.constant(undefined),
    fc.constant(null),
    fc.constantFrom(home.budgets.main, home.budgets.small),
    fc.constantFrom(other.budgets.main, 'no-such-budget'),
  );
  return fc
    .record({
      eventId: fc.oneof(
        { weight: 6, arbitrary: fc.nat(1_000_000_000).map((n) => `ev-${n}`) },
        { weight: 2, arbitrary: fc.nat(30).map((n) => `ev-replayed-${n}`) },
        { weight: 2, arbitrary: idLike('ev-', 30) },
      ),
      envelopeId,
      budgetId,
      type: fc.constantFrom(...EVENT_SUBJECTS),
      time: timestamp,
      pricing: fc.oneof(
        // The reported cost counts, whatever the model.
        fc.record({
          cost: costUsd,
          model: fc.oneof(fc.constant(undefined), fc.constant(null), fc.constant(PRICED_MODEL.id), oddText),
          input: tokenCount,
          output: tokenCount,
        }),
        // Neither cost nor model: nothing to charge but tokens.
        fc.record({
          cost: fc.constantFrom(undefined, null),
          model: fc.constantFrom(undefined, null),
          input: tokenCount,
          output: tokenCount,
        }),
        // Priced by model from the suite's price table (an unknown model at the fixed rate).
        fc.record({
          cost: fc.constantFrom(undefined, null),
          model: fc.oneof(
            fc.constant(PRICED_MODEL.id),
            oddText.map((s) => `zz-unknown-${s.replaceAll('/', '|')}`),
          ),
          input: pricedTokenCount,
          output: pricedTokenCount,
        }),
      ),
      payload: fc.option(
        fc.oneof(
          fc.dictionary(fc.string({ maxLength: 10 }), smallJson, { maxKeys: 5 }),
          fc.record({ provider: oddText, execution_id: executionId }),
          // Right at the nesting bound.
          fc.constant(JSON.parse(nestedText(MAX_METADATA_DEPTH)) as Record<string, unknown>),
        ),
        { nil: undefined },
      ),
      source: fc.option(fc.oneof(fc.constantFrom('proxy:pod-1', 'proxy:pod-2', 'rest'), oddText), { nil: undefined }),
      extra: fc.option(smallJson, { nil: undefined }),
    })
    .map((g) => {
      const costGiven = g.pricing.cost ?? null;
      const model = g.pricing.model ?? null;
      const tokens = { input: g.pricing.input, output: g.pricing.output };
      const body: Record<string, unknown> = {
        event_id: g.eventId,
        tenant_id: home.tenantId,
        envelope_id: g.envelopeId,
        event_type: g.type,
        timestamp: g.time,
        tokens,
      };
      if (g.budgetId !== undefined) body.budget_id = g.budgetId;
      if (g.pricing.cost !== undefined) body.cost_usd = g.pricing.cost;
      if (g.pricing.model !== undefined) body.model = g.pricing.model;
      if (g.payload !== undefined) body.payload = g.payload;
      if (g.source !== undefined) body.source = g.source;
      // Keys the schema does not know are dropped, not refused.
      if (g.extra !== undefined) body.unknown_field = g.extra;
      const charge: Totals = {
        tokens_input: tokens.input,
        tokens_output: tokens.output,
        cost_micros: costMicros(costGiven, model, tokens),
        llm_calls: g.type.startsWith('llm.') ? 1 : 0,
        tool_calls: g.type.startsWith('tool.') ? 1 : 0,
      };
      return {
        suffix: `events.${g.type}`,
        body,
        fate: {
          kind: 'usage',
          event: {
            eventId: g.eventId.toWellFormed(),
            envelopeId: g.envelopeId.toWellFormed(),
            budgetId: g.budgetId?.toWellFormed() ?? null,
            fromProxy: g.source?.startsWith('proxy:') === true,
            charge,
          },
        },
        label: `usage ${JSON.stringify(g.eventId)} on ${JSON.stringify(g.envelopeId)} budget ${String(g.budgetId)} tokens ${tokens.input}/${tokens.output} cost ${String(costGiven)} model ${JSON.stringify(model)}`,
        required: ['event_id', 'tenant_id', 'envelope_id', 'event_type', 'timestamp', 'tokens'],
        ids: ['event_id', 'envelope_id', 'budget_id'],
        times: ['timestamp'],
        wrong: {
          event_id: STRING_WRONG,
          envelope_id: STRING_WRONG,
          budget_id: STRING_WRONG,
          event_type: [null, ...STRING_WRONG],
          tokens: [null, 5, 'many', [], { input: 1 }, { input: -1, output: 0 }, { input: 1.5, output: 0 }],
          cost_usd: ['1', true, -1, -1e-9],
          model: STRING_WRONG,
          payload: [null, [], 'text', 5, JSON.parse(nestedText(MAX_METADATA_DEPTH + 1))],
          source: [null, ...STRING_WRONG],
          timestamp: [1_700_000_000, null, {}],
        },
      } satisfies Valid;
    });
}

function opened(home: TenantIds, other: TenantIds): fc.Arbitrary<Valid> {
  return fc
    .record({
      envelopeId: fc.oneof(
        { weight: 9, arbitrary: idLike('o-', 60) },
        { weight: 1, arbitrary: fc.constant(other.envelopes.e2) },
      ),
      executionId,
      budgetId: fc.constantFrom(null, home.budgets.main, home.budgets.quiet, other.budgets.main, 'no-such-budget'),
      adapterType: fc.option(fc.oneof(fc.constantFrom('proxy', 'langchain'), oddText), { nil: undefined }),
      source: fc.oneof(fc.constantFrom('proxy:pod-1', 'proxy'), oddText),
      time: timestamp,
    })
    .map((g) => {
      const body: Record<string, unknown> = {
        tenant_id: home.tenantId,
        envelope_id: g.envelopeId,
        execution_id: g.executionId,
        budget_id: g.budgetId,
        status: 'AUTHORIZED',
        source: g.source,
        occurred_at: g.time,
      };
      if (g.adapterType !== undefined) body.adapter_type = g.adapterType;
      return {
        suffix: 'envelopes.created',
        body,
        fate: {
          kind: 'opened',
          envelopeId: g.envelopeId.toWellFormed(),
          budgetId: g.budgetId,
          adapterType: g.adapterType?.toWellFormed() ?? 'proxy',
          source: g.source.toWellFormed(),
        },
        label: `opened ${JSON.stringify(g.envelopeId)} budget ${String(g.budgetId)}`,
        required: ['tenant_id', 'envelope_id', 'execution_id', 'budget_id', 'status', 'source', 'occurred_at'],
        ids: ['envelope_id', 'budget_id'],
        times: ['occurred_at'],
        wrong: {
          envelope_id: STRING_WRONG,
          execution_id: STRING_WRONG,
          budget_id: STRING_WRONG,
          status: ['RUNNING', 'authorized', 5, null],
          adapter_type: [null, ...STRING_WRONG],
          source: [null, ...STRING_WRONG],
          occurred_at: [1_700_000_000, null],
        },
      } satisfies Valid;
    });
}

/** A lifecycle message: on `envelopes.terminated` it may end an envelope; on `envelopes.created` it is an announcement. */
function lifecycle(home: TenantIds, other: TenantIds, on: 'created' | 'terminated'): fc.Arbitrary<Valid> {
  const envelopeId =
    on === 'created'
      ? idLike('o-', 60)
      : fc.oneof(
          { weight: 2, arbitrary: fc.constantFrom(home.envelopes.t1, home.envelopes.t2) },
          { weight: 7, arbitrary: idLike('t-', 60) },
          { weight: 1, arbitrary: fc.constant(other.envelopes.e3) },
        );
  return fc
    .record({
      envelopeId,
      executionId,
      budgetId: fc.constantFrom(null, home.budgets.quiet, other.budgets.main, 'no-such-budget'),
      // An announcement on `created` is anything but a proxy's opening (AUTHORIZED with a source).
      status: on === 'created' ? fc.constantFrom(...STATUSES) : fc.constantFrom(...STATUSES, ...TERMINATED_STATUSES),
      reason: fc.option(fc.oneof(fc.string({ maxLength: 40 }), oddText), { nil: null }),
      force: fc.option(fc.boolean(), { nil: undefined }),
      time: timestamp,
    })
    .map((g) => {
      const body: Record<string, unknown> = {
        tenant_id: home.tenantId,
        envelope_id: g.envelopeId,
        execution_id: g.executionId,
        budget_id: g.budgetId,
        status: g.status,
        reason: g.reason,
        occurred_at: g.time,
      };
      if (g.force !== undefined) body.force = g.force;
      const fate: Fate =
        on === 'created'
          ? { kind: 'announced' }
          : { kind: 'ended', envelopeId: g.envelopeId.toWellFormed(), budgetId: g.budgetId, status: g.status };
      return {
        suffix: `envelopes.${on}`,
        body,
        fate,
        label: `${on === 'created' ? 'announced' : 'ended'} ${JSON.stringify(g.envelopeId)} ${g.status}`,
        required: ['tenant_id', 'envelope_id', 'execution_id', 'budget_id', 'status', 'reason', 'occurred_at'],
        ids: ['envelope_id', 'budget_id'],
        times: ['occurred_at'],
        wrong: {
          envelope_id: STRING_WRONG,
          execution_id: STRING_WRONG,
          budget_id: STRING_WRONG,
          status: ['DONE', 'terminated', 5, null],
          reason: STRING_WRONG,
          force: ['yes', 1, null],
          occurred_at: [1_700_000_000, null],
        },
      } satisfies Valid;
    });
}

function violation(home: TenantIds): fc.Arbitrary<Valid> {
  const text = fc.oneof(fc.string({ maxLength: 40 }), oddText);
  // A decision is a name and an envelope id an id: neither empty, the id well-formed.
  const named = fc.string({ minLength: 1, maxLength: 40 });
  return fc
    .record({
      policyId: fc.oneof(fc.uuid(), text),
      ruleId: fc.option(text, { nil: null }),
      action: fc.oneof(fc.constantFrom('tool:shell', 'llm:gpt-4o', 'execution:start'), text),
      decision: fc.oneof(fc.constantFrom('DENY', 'REQUIRE_APPROVAL'), named),
      envelopeId: fc.option(fc.oneof(fc.constant(home.envelopes.e1), named), { nil: null }),
      // Right at the bound (MAX_TEXT_LENGTH).
      message: fc.oneof(text, fc.constant('m'.repeat(MAX_TEXT_LENGTH))),
      time: timestamp,
      source: fc.option(fc.oneof(fc.constantFrom('proxy:pod-1', 'control-plane'), oddText), { nil: undefined }),
    })
    .map((g) => {
      const body: Record<string, unknown> = {
        tenant_id: home.tenantId,
        policy_id: g.policyId,
        rule_id: g.ruleId,
        denied_action: g.action,
        decision: g.decision,
        envelope_id: g.envelopeId,
        message: g.message,
        occurred_at: g.time,
      };
      if (g.source !== undefined) body.source = g.source;
      // The control plane audits its own denials when it makes them.
      const audited = (g.source ?? 'control-plane') !== 'control-plane';
      return {
        suffix: 'policies.violation',
        body,
        fate: { kind: 'violation', audited },
        label: `violation source ${JSON.stringify(g.source)}`,
        required: [
          'tenant_id',
          'policy_id',
          'rule_id',
          'denied_action',
          'decision',
          'envelope_id',
          'message',
          'occurred_at',
        ],
        ids: [],
        times: ['occurred_at'],
        wrong: {
          policy_id: [null, ...STRING_WRONG],
          rule_id: STRING_WRONG,
          denied_action: [null, ...STRING_WRONG],
          decision: [null, ...STRING_WRONG],
          envelope_id: STRING_WRONG,
          message: [null, ...STRING_WRONG],
          source: [null, ...STRING_WRONG],
          occurred_at: [1_700_000_000, null],
        },
      } satisfies Valid;
    });
}

function validOne(home: TenantIds, other: TenantIds): fc.Arbitrary<Valid> {
  return fc.oneof(
    { weight: 10, arbitrary: usage(home, other) },
    { weight: 2, arbitrary: opened(home, other) },
    { weight: 1, arbitrary: lifecycle(home, other, 'created') },
    { weight: 3, arbitrary: lifecycle(home, other, 'terminated') },
    { weight: 2, arbitrary: violation(home) },
  );
}

const subjectOf = (tenant: string, suffix: string): string => `svc.${tenant}.${suffix}`;

function draft(subject: string, bytes: Uint8Array, fate: Fate, label: string, longMsgId = false): Draft {
  return { subject, bytes, fate, label, longMsgId };
}

/** A valid message as generated, published as it is. */
function validDraft(home: TenantIds, other: TenantIds): fc.Arbitrary<Draft> {
  return validOne(home, other).map((v) => draft(subjectOf(home.tenantId, v.suffix), json(v.body), v.fate, v.label));
}

const refused: Fate = { kind: 'refused' };
const undecodable: Fate = { kind: 'undecodable' };

/** One known mutation of a valid message that its schema (or the tenant rule) must refuse. */
function brokenDraft(home: TenantIds, other: TenantIds): fc.Arbitrary<Draft> {
  const mutated = validOne(home, other).chain((v) => {
    const subject = subjectOf(home.tenantId, v.suffix);
    const out = (body: unknown, why: string, on = subject) => draft(on, json(body), refused, `${v.label}; ${why}`);
    const mutations: Array<fc.Arbitrary<Draft>> = [
      fc.constantFrom(...v.required).map((key) => {
        const { [key]: _gone, ...rest } = v.body;
        return out(rest, `missing ${key}`);
      }),
      fc
        .constantFrom(...Object.keys(v.wrong))
        .chain((key) =>
          fc.constantFrom(...v.wrong[key]!).map((value) => out({ ...v.body, [key]: value }, `wrong ${key}`)),
        ),
      fc
        .constantFrom(
          other.tenantId,
          '',
          home.tenantId.toUpperCase(),
          `${home.tenantId} `,
          `${home.tenantId}\u200b`,
          'system',
        )
        .map((tenant) => out({ ...v.body, tenant_id: tenant }, `body tenant ${JSON.stringify(tenant)}`)),
      // The right body on another tenant's subject.
      fc.constant(null).map(() => out(v.body, 'on another tenant subject', subjectOf(other.tenantId, v.suffix))),
      // A subject whose tenant could never be a storage key, its body agreeing.
      fc.integer({ min: 65, max: 2_100 }).map((n) => {
        const tenant = 't'.repeat(n);
        return out({ ...v.body, tenant_id: tenant }, `subject tenant of ${n} characters`, subjectOf(tenant, v.suffix));
      }),
    ];
    if (v.times.length > 0)
      mutations.push(
        fc
          .tuple(fc.constantFrom(...v.times), fc.constantFrom(...BAD_TIMESTAMPS))
          .map(([key, bad]) => out({ ...v.body, [key]: bad }, `${key} ${JSON.stringify(bad)}`)),
      );
    if (v.ids.length > 0)
      mutations.push(
        fc
          .tuple(
            fc.constantFrom(...v.ids),
            fc.oneof(
              fc.constant(''),
              fc.integer({ min: MAX_ID_LENGTH + 1, max: 5_000 }).map((n) => 'i'.repeat(n)),
            ),
          )
          .map(([key, id]) =>
            out({ ...v.body, [key]: id }, `${key} ${JSON.stringify(id.slice(0, 8))} of ${id.length} characters`),
          ),
      );
    if (v.fate.kind === 'usage') {
      mutations.push(
        fc.integer({ min: MAX_METADATA_DEPTH + 1, max: 20_000 }).map((depth) => {
          const text = JSON.stringify({ ...v.body, payload: {} }).replace(
            '"payload":{}',
            `"payload":${nestedText(depth)}`,
          );
          return draft(subject, encoder.encode(text), refused, `${v.label}; payload nested ${depth} deep`);
        }),
        fc
          .constantFrom(-1, 1.5, Number.MAX_SAFE_INTEGER + 1, 1e300)
          .map((n) => out({ ...v.body, tokens: { input: n, output: 0 } }, `tokens.input ${n}`)),
      );
    }
    if (v.fate.kind === 'violation')
      // A violation is de-duplicated by its msg id, which would become a storage key.
      mutations.push(
        fc.constant(null).map(() => ({
          ...draft(subject, json(v.body), refused, `${v.label}; long msg id`),
          longMsgId: true,
        })),
      );
    return fc.oneof(...mutations);
  });
  const anySubject = fc.constantFrom(
    ...EVENT_SUBJECTS.map((t) => `events.${t}`),
    'envelopes.created',
    'envelopes.terminated',
    'policies.violation',
  );
  const raw = fc
    .tuple(anySubject, rawPayload)
    .map(([suffix, [bytes, fate, label]]) => draft(subjectOf(home.tenantId, suffix), bytes, fate, label));
  return fc.oneof({ weight: 4, arbitrary: mutated }, { weight: 1, arbitrary: raw });
}

/** Bytes that are not a message: not JSON, empty, or JSON of the wrong shape. */
const rawPayload: fc.Arbitrary<[Uint8Array, Fate, string]> = fc.oneof(
  fc
    .constantFrom('{', '{"event_id":', 'not json at all', '\u0000', '{"a":1}}', "{'a':1}", 'NaN', '[1,2')
    .map((text): [Uint8Array, Fate, string] => [encoder.encode(text), undecodable, `text ${JSON.stringify(text)}`]),
  fc.uint8Array({ minLength: 1, maxLength: 64 }).map((bytes): [Uint8Array, Fate, string] => {
    // Bytes that happen to decode as JSON are refused by the schema instead.
    let decodes = true;
    try {
      JSON.parse(new TextDecoder().decode(bytes));
    } catch {
      decodes = false;
    }
    return [bytes, decodes ? refused : undecodable, 'random bytes'];
  }),
  fc.constant<[Uint8Array, Fate, string]>([new Uint8Array(0), refused, 'empty payload']),
  fc
    .constantFrom('null', '[]', '"text"', '42', 'true', '{}', '{"__proto__":{"tenant_id":"x"}}')
    .map((text): [Uint8Array, Fate, string] => [encoder.encode(text), refused, `JSON ${text}`]),
);

/** A batch of `size` drafts, mixed or broken only, with replays of some of them. */
export function batches(home: TenantIds, other: TenantIds, size: number): fc.Arbitrary<GeneratedBatch> {
  const valid = validDraft(home, other);
  const broken = brokenDraft(home, other);
  const mixed = fc.array(fc.oneof({ weight: 3, arbitrary: valid }, { weight: 2, arbitrary: broken }), {
    minLength: size,
    maxLength: size,
  });
  const brokenOnly = fc.array(broken, { minLength: size, maxLength: size });
  return fc
    .oneof(
      { weight: 3, arbitrary: mixed.map((d) => ({ drafts: d, brokenOnly: false })) },
      { weight: 1, arbitrary: brokenOnly.map((d) => ({ drafts: d, brokenOnly: true })) },
    )
    .chain(({ drafts, brokenOnly: only }) =>
      fc
        .array(
          fc.record({ of: fc.nat(size - 1), after: fc.nat(size), sameMsgId: fc.boolean() }).map((r) => ({
            of: r.of,
            at: Math.max(r.of + 1, r.after),
            sameMsgId: r.sameMsgId,
          })),
          { maxLength: Math.ceil(size / 8) },
        )
        .map((replays) => ({ drafts, replays, brokenOnly: only })),
    );
}

export function consumerOf(subject: string): Consumer {
  const [, , family, name] = subject.split('.');
  if (family === 'events') return 'event-processor';
  if (family === 'policies') return 'violation-auditor';
  return name === 'created' ? 'envelope-opener' : 'envelope-terminator';
}
