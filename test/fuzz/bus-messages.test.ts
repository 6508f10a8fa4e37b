import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Expectation, type ExpectedEnvelope, type Sent } from './bus-expectation.ts';
import { batches, consumerOf, type GeneratedBatch, type Totals } from './bus-messages.ts';
import { metricValue } from '../harness/processes.ts';
import { startBusTarget, type BusTarget } from './bus-target.ts';
import { fuzzParameters, fuzzRuns } from './seed.ts';

/**
 * Generated messages on every subject the control plane consumes, published with a raw NATS
 * client onto a spawned control plane: each valid one is applied exactly once, each broken one is
 * set aside exactly once and changes nothing, the consumers never stall, the process never
 * crashes, and nothing published about one tenant changes another. Black box: NATS in; REST,
 * `/metrics`, the dead-letter stream and the budget bucket out.
 */

/** Messages per batch; a sentinel follows each batch. */
const BATCH = 40;
/** How long a sentinel published after a batch may take to be applied. */
const SENTINEL_BOUND_MS = 5_000;
/** How long set-aside messages of a batch may take to reach the dead letters once its sentinel was applied. */
const SETTLE_BOUND_MS = 5_000;

const CONSUMERS = ['event-processor', 'envelope-opener', 'envelope-terminator', 'violation-auditor'] as const;
const REASONS = ['refused', 'undecodable', 'failed'] as const;

let target: BusTarget;
let expectation: Expectation;
let otherBefore: string[];
let deadLettersRead = 0;
let outputRead = 0;
const setAsideSeen = new Set<number>();
const sentinelLatencies: number[] = [];

beforeAll(async () => {
  target = await startBusTarget();
  expectation = new Expectation(target.home);
  otherBefore = await snapshot(target.other.tenantId);
}, 60_000);
afterAll(async () => target?.close());

/** What REST lists of a tenant: a write anywhere shows in it (lists are newest first or complete). */
async function snapshot(tenant: string): Promise<string[]> {
  const paths = ['/v1/budgets', '/v1/envelopes?limit=1000', '/v1/events?limit=100', '/v1/audit?limit=100'];
  const answers = await Promise.all(paths.map((path) => target.rest('GET', path, tenant)));
  return answers.map((a, i) => `${paths[i]} ${a.status} ${JSON.stringify(a.body)}`);
}

/** Where two snapshots differ, briefly. */
function changes(before: string[], after: string[]): string[] {
  return before.flatMap((was, i) => {
    const now = after[i] ?? '';
    if (was === now) return [];
    let at = 0;
    while (was[at] === now[at]) at += 1;
    const from = Math.max(0, at - 150);
    return [
      `${was.slice(0, was.indexOf(' '))}: was …${was.slice(from, at + 150)}…, now …${now.slice(from, at + 150)}…`,
    ];
  });
}

/** Probes until `done` holds or the bound has passed; the last value either way. */
async function within<T>(boundMs: number, probe: () => Promise<T>, done: (value: T) => boolean): Promise<T> {
  const deadline = Date.now() + boundMs;
  for (;;) {
    const value = await probe();
    if (done(value) || Date.now() > deadline) return value;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

const encoder = new TextEncoder();
const json = (value: unknown): Uint8Array => encoder.encode(JSON.stringify(value));

/** The batch as published: msg ids given, replays inserted after what they replay. */
function materialize(batch: GeneratedBatch, k: number): Array<Omit<Sent, 'seq' | 'duplicate'> & { again: boolean }> {
  const msgId = (name: string, long: boolean) => {
    const id = `fuzz-${k}-${name}`;
    return long ? id.padEnd(3_000, 'm') : id;
  };
  const list = batch.drafts.map((d, i) => ({ ...d, msgId: msgId(String(i), d.longMsgId), again: false }));
  const replays = [...batch.replays].sort((a, b) => b.at - a.at);
  for (const [j, replay] of replays.entries()) {
    const original = list[replay.of]!;
    const copy = replay.sameMsgId
      ? { ...original, again: true, label: `${original.label} (same msg id again)` }
      : { ...original, msgId: msgId(`r${j}`, original.longMsgId), label: `${original.label} (again)` };
    list.splice(replay.at, 0, copy);
  }
  return list;
}

/** One valid message per consumer on the sentinel tenant, and whether each was applied. */
function sentinels(k: number) {
  const { tenantId, envelopes, budgets } = target.sentinel;
  const now = new Date().toISOString();
  const subject = (suffix: string) => `svc.${tenantId}.${suffix}`;
  const messages = [
    {
      subject: subject('events.llm.call'),
      bytes: json({
        event_id: `sentinel-${k}`,
        tenant_id: tenantId,
        envelope_id: envelopes.e1,
        event_type: 'llm.call',
        timestamp: now,
        tokens: { input: 1, output: 0 },
        cost_usd: 0,
        source: 'proxy:sentinel',
      }),
      msgId: `sentinel-event-${k}`,
    },
    {
      subject: subject('envelopes.created'),
      bytes: json({
        tenant_id: tenantId,
        envelope_id: `sentinel-opened-${k}`,
        execution_id: `sentinel-opened-${k}`,
        budget_id: null,
        status: 'AUTHORIZED',
        source: 'proxy:sentinel',
        occurred_at: now,
      }),
      msgId: `sentinel-opened-${k}`,
    },
    {
      subject: subject('envelopes.terminated'),
      bytes: json({
        tenant_id: tenantId,
        envelope_id: `sentinel-ended-${k}`,
        execution_id: `sentinel-ended-${k}`,
        budget_id: null,
        status: 'TERMINATED',
        reason: 'sentinel',
        occurred_at: now,
      }),
      msgId: `sentinel-ended-${k}`,
    },
    {
      subject: subject('policies.violation'),
      bytes: json({
        tenant_id: tenantId,
        policy_id: 'sentinel',
        rule_id: null,
        denied_action: 'tool:shell',
        decision: 'DENY',
        envelope_id: null,
        message: `sentinel-${k}`,
        occurred_at: now,
        source: 'proxy:sentinel',
      }),
      msgId: `sentinel-violation-${k}`,
    },
  ];
  const applied = async (): Promise<string[]> => {
    const [usage, opened, ended, audit] = await Promise.all([
      target.rest('GET', `/v1/budgets/${budgets.main}/usage`, tenantId),
      target.rest('GET', `/v1/envelopes/sentinel-opened-${k}`, tenantId),
      target.rest('GET', `/v1/envelopes/sentinel-ended-${k}`, tenantId),
      target.rest('GET', '/v1/audit?action=policy.evaluate&limit=1', tenantId),
    ]);
    const missing: string[] = [];
    if (usage.body?.llm_calls !== k) missing.push(`event (llm_calls ${String(usage.body?.llm_calls)})`);
    if (opened.status !== 200) missing.push('opened envelope');
    if (ended.body?.state !== 'TERMINATED') missing.push('ended envelope');
    if (audit.body?.[0]?.metadata?.message !== `sentinel-${k}`) missing.push('violation');
    return missing;
  };
  return { messages, applied };
}

/** Lines of the process output since the last look that tell of a crash or of a message its handler failed on. */
function troubleInOutput(): string[] {
  const output = target.cp.output();
  const fresh = output.slice(outputRead);
  outputRead = output.length;
  return fresh
    .split('\n')
    .filter((line) => line.trim() !== '')
    .filter((line) => {
      let entry: { level?: number; msg?: string };
      try {
        entry = JSON.parse(line) as { level?: number; msg?: string };
      } catch {
        return true; // a stack trace or anything else that is not a log record
      }
      if (entry.msg === 'bus message set aside') return false;
      // A batch or message its handler threw on: validation let through what storage cannot take.
      return (entry.level ?? 0) >= 50 || /handler (failed|kept failing)/.test(entry.msg ?? '');
    })
    .map((line) => line.slice(0, 600));
}

const usd = (micros: number) => micros / 1_000_000;

function totalsProblems(what: string, got: Record<string, unknown> | undefined, want: Totals): string[] {
  const expected = {
    tokens_input: want.tokens_input,
    tokens_output: want.tokens_output,
    cost_usd: usd(want.cost_micros),
    llm_calls: want.llm_calls,
    tool_calls: want.tool_calls,
  };
  const actual = Object.fromEntries(Object.keys(expected).map((key) => [key, got?.[key]]));
  return JSON.stringify(actual) === JSON.stringify(expected)
    ? []
    : [`${what}: ${JSON.stringify(actual)}, expected ${JSON.stringify(expected)}`];
}

/** An id REST can address in a path. */
const addressable = (id: string) => id.length <= 100 && id.isWellFormed();

const TERMINATION_REASON: Record<string, string> = {
  TERMINATED: 'manual',
  BUDGET_EXCEEDED: 'budget_exceeded',
  POLICY_VIOLATION: 'policy_violation',
  TIMEOUT: 'timeout',
};

async function envelopeProblems(id: string, want: ExpectedEnvelope | undefined): Promise<string[]> {
  const res = await target.rest('GET', `/v1/envelopes/${encodeURIComponent(id)}`, target.home.tenantId);
  const name = `envelope ${JSON.stringify(id)}`;
  if (want === undefined)
    return res.status === 404
      ? []
      : [`${name} must not exist: ${res.status} ${JSON.stringify(res.body).slice(0, 300)}`];
  if (res.status !== 200) return [`${name}: ${res.status} ${JSON.stringify(res.body).slice(0, 300)}`];
  const body = res.body as Record<string, any>;
  const problems = totalsProblems(`${name} cost`, body.cost_summary, want.cost);
  if (body.envelope_id !== id) problems.push(`${name} reads back as ${JSON.stringify(body.envelope_id)}`);
  if (body.budget_id !== want.budgetId) problems.push(`${name} budget ${body.budget_id}, expected ${want.budgetId}`);
  if (want.stateKnown) {
    const ended = TERMINATION_REASON[want.state];
    const state = ended !== undefined ? 'TERMINATED' : want.state;
    if (body.state !== state || (body.termination_reason ?? null) !== (ended ?? null))
      problems.push(`${name} state ${body.state}/${body.termination_reason}, expected ${state}/${ended ?? null}`);
  }
  if (want.origin === 'opened' && (body.adapter_type !== want.adapterType || body.metadata?.source !== want.source))
    problems.push(
      `${name} adapter ${JSON.stringify(body.adapter_type)} source ${JSON.stringify(body.metadata?.source)}`,
    );
  return problems;
}

async function deadLetterProblems(): Promise<string[]> {
  const problems: string[] = [];
  await within(
    SETTLE_BOUND_MS,
    async () => {
      for (const letter of await target.deadLetters(deadLettersRead)) {
        deadLettersRead = letter.seq;
        const seq = Number(letter.headers['Svc-Stream-Seq']);
        const want = expectation.setAside.get(seq);
        if (want === undefined) {
          problems.push(
            `set aside, though valid or not ours: ${letter.subject.slice(0, 120)} seq ${seq} (${letter.headers['Svc-Reason']}: ${letter.headers['Svc-Detail']})`,
          );
          continue;
        }
        if (setAsideSeen.has(seq)) problems.push(`set aside twice: ${want.sent.label}`);
        setAsideSeen.add(seq);
        const got = {
          consumer: letter.headers['Svc-Consumer'],
          reason: letter.headers['Svc-Reason'],
          subject: letter.subject,
        };
        const expected = { consumer: want.consumer, reason: want.reason, subject: `deadletter.${want.sent.subject}` };
        if (JSON.stringify(got) !== JSON.stringify(expected))
          problems.push(
            `${want.sent.label}: set aside as ${JSON.stringify(got).slice(0, 300)} (${letter.headers['Svc-Detail']}), expected ${JSON.stringify(expected).slice(0, 300)}`,
          );
        if (Buffer.compare(Buffer.from(letter.data), Buffer.from(want.sent.bytes)) !== 0)
          problems.push(`${want.sent.label}: the dead letter is not the message byte for byte`);
      }
      return setAsideSeen.size;
    },
    (seen) => seen >= expectation.setAside.size,
  );
  for (const [seq, want] of expectation.setAside)
    if (!setAsideSeen.has(seq)) problems.push(`not set aside: ${want.sent.label} (seq ${seq}, ${want.sent.fate.kind})`);
  return problems;
}

async function metricProblems(): Promise<string[]> {
  const wanted = () => {
    const lines: string[] = [];
    for (const consumer of CONSUMERS)
      for (const reason of REASONS)
        lines.push(`${consumer}/${reason} ${expectation.poison.get(`${consumer}/${reason}`) ?? 0}`);
    return lines.join('\n');
  };
  const read = async () => {
    const text = await target.metrics();
    const lines: string[] = [];
    for (const consumer of CONSUMERS)
      for (const reason of REASONS)
        lines.push(
          `${consumer}/${reason} ${metricValue(text, 'svc_bus_poison_messages_total', `consumer="${consumer}",reason="${reason}"`) ?? 0}`,
        );
    return { poison: lines.join('\n'), text };
  };
  const { poison, text } = await within(SETTLE_BOUND_MS, read, (r) => r.poison === wanted());
  const problems: string[] = [];
  if (poison !== wanted()) problems.push(`svc_bus_poison_messages_total:\n${poison}\nexpected:\n${wanted()}`);
  for (const name of ['svc_process_unhandled_rejections_total', 'svc_process_uncaught_exceptions_total']) {
    const value = metricValue(text, name);
    if (value !== 0) problems.push(`${name} is ${value}`);
  }
  return problems;
}

async function homeProblems(named: Set<string>): Promise<string[]> {
  const { home } = target;
  const problems: string[] = [];
  for (const [budgetId, want] of expectation.budgets) {
    const usage = await target.rest('GET', `/v1/budgets/${budgetId}/usage`, home.tenantId);
    problems.push(...totalsProblems(`budget ${budgetId} usage`, usage.body, want));
  }
  for (const id of named)
    if (addressable(id)) problems.push(...(await envelopeProblems(id, expectation.envelopes.get(id))));
  const listed = await target.rest('GET', '/v1/envelopes?limit=1000', home.tenantId);
  if (listed.status !== 200)
    problems.push(`envelope list: ${listed.status} ${JSON.stringify(listed.body).slice(0, 300)}`);
  else if (expectation.envelopes.size <= 1000) {
    const got = (listed.body as Array<{ envelope_id: string }>).map((e) => e.envelope_id).sort();
    const want = [...expectation.envelopes.keys()].sort();
    if (JSON.stringify(got) !== JSON.stringify(want)) {
      const extra = got.filter((id) => !expectation.envelopes.has(id));
      const missing = want.filter((id) => !got.includes(id));
      problems.push(`envelope list: extra ${JSON.stringify(extra)}, missing ${JSON.stringify(missing)}`);
    }
  }
  const chain = await target.rest('GET', '/v1/audit/verify', home.tenantId);
  if (chain.body?.valid !== true) problems.push(`audit chain: ${JSON.stringify(chain.body)}`);
  const audit = await target.rest('GET', '/v1/audit?action=policy.evaluate&limit=1000', home.tenantId);
  const records = Array.isArray(audit.body) ? (audit.body as Array<{ actor: { type: string } }>) : [];
  const audited = records.filter((r) => r.actor.type === 'proxy').length;
  if (audited !== Math.min(1000, expectation.audited))
    problems.push(`proxy denials audited: ${audited}, expected ${expectation.audited}`);
  for (const [name, budgetId] of [
    ['main', home.budgets.main],
    ['small', home.budgets.small],
  ] as const) {
    const want = expectation.budgets.get(budgetId)!;
    const used = { tokens: want.tokens_input + want.tokens_output, micros: want.cost_micros };
    const state = await within(
      SETTLE_BOUND_MS,
      () => target.budgetState(home.tenantId, budgetId),
      (s) => s?.used_tokens === used.tokens && s?.used_micros === used.micros,
    );
    if (state?.used_tokens !== used.tokens || state?.used_micros !== used.micros)
      problems.push(
        `budget ${name} in the proxies' bucket: ${JSON.stringify({ tokens: state?.used_tokens, micros: state?.used_micros })}, expected ${JSON.stringify(used)}`,
      );
  }
  return problems;
}

async function runBatch(batch: GeneratedBatch, k: number): Promise<void> {
  const homeBefore = batch.brokenOnly ? await snapshot(target.home.tenantId) : null;
  const planned = materialize(batch, k);
  const acks = await target.publish(planned);
  const problems: string[] = [];
  const named = new Set<string>();
  for (const [i, message] of planned.entries()) {
    const ack = acks[i]!;
    if (ack.duplicate !== message.again)
      problems.push(`${message.label}: JetStream duplicate ${ack.duplicate}, expected ${message.again}`);
    const sent: Sent = { ...message, seq: ack.seq, duplicate: ack.duplicate };
    expectation.apply(sent);
    const { fate } = sent;
    if (fate.kind === 'usage') named.add(fate.event.envelopeId);
    if (fate.kind === 'opened' || fate.kind === 'ended') named.add(fate.envelopeId);
  }

  const sentinel = sentinels(k);
  const started = Date.now();
  await target.publish(sentinel.messages);
  const missing = await within(SENTINEL_BOUND_MS, sentinel.applied, (m) => m.length === 0);
  sentinelLatencies.push(Date.now() - started);
  if (missing.length > 0)
    problems.push(`consumers stalled: sentinels not applied within ${SENTINEL_BOUND_MS} ms: ${missing.join(', ')}`);

  problems.push(...(await deadLetterProblems()));
  problems.push(...(await metricProblems()));
  problems.push(...(await homeProblems(named)));
  for (const change of changes(otherBefore, await snapshot(target.other.tenantId)))
    problems.push(`the other tenant changed: ${change}`);
  if (homeBefore !== null)
    for (const change of changes(homeBefore, await snapshot(target.home.tenantId)))
      problems.push(`a batch of broken messages changed the tenant: ${change}`);
  if (!target.cp.running) problems.push('the control plane exited');
  else if ((await target.rest('GET', '/health/ready')).status !== 200) problems.push('the control plane is not ready');
  const trouble = troubleInOutput();
  if (trouble.length > 0) problems.push(`process output:\n${trouble.join('\n')}`);

  if (problems.length > 0) {
    const sent = planned.map(
      (m, i) => `  #${acks[i]?.seq} ${consumerOf(m.subject)} ${m.fate.kind}: ${m.label.slice(0, 300)}`,
    );
    throw new Error(`batch ${k}:\n${problems.slice(0, 20).join('\n')}\nmessages of the batch:\n${sent.join('\n')}`);
  }
}

describe('bus messages under generated input (spawned control plane on nats-server)', () => {
  it('applies each valid message once, sets each broken one aside once, never stalls or crashes, and keeps tenants apart', async () => {
    const batchCount = Math.ceil(fuzzRuns() / BATCH);
    const parameters = fuzzParameters('bus-messages', batchCount);
    process.stdout.write(`bus-messages: ${batchCount} batches of ${BATCH} generated messages, replays besides\n`);
    let k = 0;
    const details = await fc.check(
      fc.asyncProperty(batches(target.home, target.other, BATCH), async (batch) => {
        k += 1;
        await runBatch(batch, k);
      }),
      parameters,
    );
    if (details.failed) {
      const error = details.errorInstance;
      throw new Error(
        `bus-messages failed (replay with FUZZ_SEED=${details.seed}):\n${error instanceof Error ? error.message : String(error)}`,
      );
    }
    const fates = {
      setAside: expectation.setAside.size,
      audited: expectation.audited,
      envelopes: expectation.envelopes.size,
    };
    const slowest = Math.max(...sentinelLatencies);
    process.stdout.write(`bus-messages: ${JSON.stringify(fates)}; slowest sentinel ${slowest} ms\n`);
    // The run exercised both sides.
    expect(expectation.setAside.size).toBeGreaterThan(0);
    expect([...expectation.budgets.values()].some((t) => t.llm_calls + t.tool_calls > 0)).toBe(true);
  }, 1_800_000);
});
