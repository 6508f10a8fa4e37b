import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_CATALOGUE, isSvcCode } from '../../core/errors/index.ts';
import { UsageEventMessageSchema, type UsageEventMessage } from '../../core/events/messages.ts';
import { startFuzzUpstream, type FuzzUpstream, type UpstreamFault, type UpstreamPlan } from './fuzz-upstream.ts';
import {
  billable,
  familyOf,
  offersTool,
  providerKeyEnv,
  refusalCode,
  refusalProblems,
  treatmentOf,
  ungoverned,
} from './provider-checks.ts';
import {
  COMPAT,
  DENIED_MODEL,
  DENIED_TOOL,
  providerRequests,
  sometimes,
  UPSTREAM_HOSTS,
  type ProviderRequest,
} from './provider-requests.ts';
import { startProxyTarget, type ProxyTarget } from './proxy-target.ts';
import { exchange, requestBytes, type RawAnswer, type RawRequest } from './raw-http.ts';
import { fuzzParameters, fuzzSeed } from './seed.ts';

/**
 * Every provider adapter of a spawned proxy (`node proxy/main.ts`, with a control plane and a
 * nats-server) under generated requests (bodies, encodings, framing, headers, route lookalikes)
 * and generated upstream answers (cut, reset, stalled, oversized, garbage, mistyped, encoded).
 * Per input: no 5xx but the deliberate upstream failures, every refusal an SVC code in the
 * provider's format, nothing ungoverned reaching the upstream, no tool call a policy denies
 * reaching the agent, and every call that reached the provider billed once, above zero.
 */
/** Events up to half a MiB: room for an event nested deep enough to exhaust a recursive reader. */
const LIMITS = { body: 256 * 1024, answer: 1024 * 1024, event: 512 * 1024 };
/** How long an answer read after its client left is still drained before the worst case is charged. */
const DRAIN_MS = 150;
/** The longest any input may take end to end; longer counts as a hang. */
const EXCHANGE_TIMEOUT_MS = 8000;

let target: ProxyTarget;
let upstream: FuzzUpstream;
const executions = ['fuzz-exec-a', 'fuzz-exec-b'];
/**
 * Every input by request id, for the checks that wait until late upstream calls and events are
 * in. An input checked whole already keeps only what the billing count needs.
 */
const inputs = new Map<
  string,
  { request: ProviderRequest | null; routed: ProviderRequest['routed']; sent: RawRequest['headers']; note: string }
>();

beforeAll(async () => {
  upstream = await startFuzzUpstream({ eventBytes: LIMITS.event, answerBytes: LIMITS.answer });
  target = await startProxyTarget({
    policies: [
      { name: 'no-cheap-model', rules: [{ action: `llm:${DENIED_MODEL}`, effect: 'deny' }] },
      { name: 'no-shell', rules: [{ action: `tool:${DENIED_TOOL}`, effect: 'deny' }] },
    ],
    env: () => ({
      SVC_UPSTREAM_OVERRIDES: UPSTREAM_HOSTS.map((host) => `${host}=${upstream.url}`).join(','),
      SVC_PROXY_COMPATIBLE_HOSTS: COMPAT,
      SVC_PROXY_BODY_LIMIT_BYTES: String(LIMITS.body),
      SVC_PROXY_RESPONSE_LIMIT_BYTES: String(LIMITS.answer),
      SVC_PROXY_STREAM_EVENT_LIMIT_BYTES: String(LIMITS.event),
      SVC_PROXY_ABORT_DRAIN_MS: String(DRAIN_MS),
      SVC_PROVIDER_KEY_RELOAD_SECONDS: '0',
      ...providerKeyEnv(),
    }),
  });
}, 90_000);
afterAll(async () => {
  await target?.close();
  await upstream?.close();
});

const fraction = fc.double({ min: 0, max: 1, noNaN: true });

const faults: fc.Arbitrary<UpstreamFault> = fc.oneof(
  { weight: 10, arbitrary: fc.constant({ kind: 'honest' as const }) },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('cut' as const),
      at: fraction,
      framing: fc.constantFrom('length' as const, 'chunked' as const, 'close' as const),
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('reset' as const), at: fraction }) },
  fc.constant({ kind: 'reset-before-headers' as const }),
  fc.record({ kind: fc.constant('garbage' as const), bytes: fc.uint8Array({ maxLength: 400 }) }),
  fc.record({
    kind: fc.constant('retyped' as const),
    contentType: fc.constantFrom('text/event-stream', 'application/json', 'text/html', 'application/octet-stream', ''),
  }),
  fc.constant({ kind: 'oversize' as const }),
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('status' as const),
      status: fc.constantFrom(400, 401, 404, 429, 500, 503),
      body: fc.constantFrom('{"error":{"message":"upstream refusal","type":"invalid_request_error"}}', 'garbage', ''),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('usage' as const),
      value: fc.constantFrom('-1', '1e308', '"12"', 'null', '1.5', '9007199254740993', '1e21', '[]', '{}', '123456'),
    }),
  },
  fc.record({
    kind: fc.constant('encoded' as const),
    coding: fc.constantFrom('gzip' as const, 'br' as const, 'deflate' as const),
  }),
  fc.record({ kind: fc.constant('hang' as const), at: fraction }),
  fc.record({ kind: fc.constant('short' as const), missing: fc.integer({ min: 1, max: 100 }) }),
  { weight: 2, arbitrary: fc.constant({ kind: 'unstreamed' as const }) },
  fc.constant({ kind: 'bom' as const }),
  fc.record({ kind: fc.constant('deep' as const), depth: fc.integer({ min: 100, max: 12_000 }) }),
);

const plans: fc.Arbitrary<UpstreamPlan> = fc.record({
  fault: faults,
  toolCall: sometimes(fc.constantFrom(DENIED_TOOL, 'search'), 2, undefined),
  outputTokens: sometimes(fc.integer({ min: 0, max: 30 }), 3, undefined),
  firstByteDelayMs: fc.oneof({ weight: 12, arbitrary: fc.constant(0) }, fc.integer({ min: 1, max: 120 })),
  pieces: fc.oneof({ weight: 3, arbitrary: fc.constant(1) }, fc.integer({ min: 2, max: 12 })),
  pieceDelayMs: fc.oneof({ weight: 6, arbitrary: fc.constant(0) }, fc.integer({ min: 1, max: 10 })),
});

/** Faults that are the upstream's own failure: a 502 naming the upstream may answer them. */
const UPSTREAM_FAILURES = new Set([
  'cut',
  'reset',
  'reset-before-headers',
  'garbage',
  'oversize',
  'short',
  'hang',
  'retyped',
  'encoded',
  'usage',
  'unstreamed',
  'bom',
  'deep',
]);

/** How long an event may take from the proxy's outbox to NATS on a loaded machine. */
const EVENT_WAIT_MS = 10_000;

async function settledEvents(id: string, expected: number): Promise<UsageEventMessage[]> {
  const deadline = Date.now() + DRAIN_MS + EVENT_WAIT_MS;
  for (;;) {
    const events = target.llmCalls.get(id) ?? [];
    if (events.length >= expected || Date.now() > deadline) return events;
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** What reached the upstream for an input and what it was charged: ungoverned traffic, missing, double or zero charges. */
function reachedProblems(
  id: string,
  routed: ProviderRequest['routed'],
  request: ProviderRequest | null,
  sent: RawRequest['headers'],
  events: readonly UsageEventMessage[],
): string[] {
  const problems: string[] = [];
  const reached = upstream.reached(id);
  const provider = routed;
  if (provider === null) {
    if (reached.length > 0) problems.push('a request no provider route serves reached the upstream');
    if (events.length > 0) problems.push(`${events.length} llm.call events for a request no provider route serves`);
    return problems;
  }
  // Whether what reached it was governed is checked while its body is still held.
  if (request !== null) {
    for (const r of reached) {
      problems.push(
        ...ungoverned(provider, r, request.readBytes, request.raw.headers).map((p) => `${r.method} ${r.path}: ${p}`),
      );
    }
  }
  const expected = reached.filter((r) => billable(provider, r, sent)).length;
  if (events.length !== expected)
    problems.push(`${events.length} llm.call events for ${expected} billable upstream calls`);
  for (const event of events) {
    if (!UsageEventMessageSchema.safeParse(event).success)
      problems.push(`llm.call event outside its schema: ${JSON.stringify(event)}`);
    if (!(typeof event.cost_usd === 'number' && event.cost_usd > 0 && Number.isFinite(event.cost_usd)))
      problems.push(`llm.call billed at ${event.cost_usd}: ${JSON.stringify(event.payload)}`);
  }
  return problems;
}

/** What the answer an input got shows wrong: a 5xx not caused on purpose, a refusal without its SVC code, a denied tool call. */
function answerProblems(id: string, request: ProviderRequest, plan: UpstreamPlan, answer: RawAnswer): string[] {
  const problems: string[] = [];
  const status = answer.status;
  const reached = upstream.reached(id);
  if (answer.timedOut) problems.push(`no complete answer within ${EXCHANGE_TIMEOUT_MS} ms`);
  // The provider's own refusal (or failure status) is relayed as it came.
  const relayed = status !== null && status >= 400 && reached.some((r) => r.answered === status);
  if (status !== null && status >= 500 && !relayed) {
    const code = refusalCode(answer);
    const deliberate = UPSTREAM_FAILURES.has(plan.fault.kind) && reached.length > 0;
    if (!(deliberate && status === 502 && (code === 'SVC-ADP-5001' || code === 'SVC-ADP-5005')))
      problems.push(
        `server error ${status} (${code ?? 'no SVC code'}) for upstream fault ${plan.fault.kind}: ${answer.body.toString('utf8', 0, 300)}`,
      );
  }
  if (status !== null && status >= 400 && !relayed && request.raw.method === 'HEAD') {
    // An answer to HEAD has no body: a provider refusal still names its code in x-svc-error-code.
    const code = answer.headers['x-svc-error-code']?.[0];
    if (
      request.routed !== null &&
      !request.broken &&
      (code === undefined || !isSvcCode(code) || ERROR_CATALOGUE[code].http !== status)
    )
      problems.push(`HEAD refused with ${status} and x-svc-error-code ${code}`);
  } else if (status !== null && status >= 400 && !relayed) {
    const family = request.routed === null ? null : familyOf(request.routed);
    let refusal = refusalProblems(answer, family);
    // A request the HTTP parser refuses never reaches a provider adapter: the generic body is right for it.
    if (refusal.length > 0 && family !== null && request.broken) refusal = refusalProblems(answer, null);
    problems.push(...refusal);
  }
  // Tool calls are judged on the providers' routes; a call outside them is metered by estimate
  // and its answer relayed as it comes (docs/providers.md), so only routed calls are held to it.
  const provider = request.routed;
  const onRoute =
    provider !== null && reached.every((r) => treatmentOf(provider, r, request.raw.headers) === 'metered');
  if (status !== null && status < 300 && onRoute && offersTool(answer, DENIED_TOOL))
    problems.push(`the agent was handed a call to the denied tool ${DENIED_TOOL}`);
  return problems;
}

describe('provider adapters of a spawned proxy under generated requests and upstream answers', () => {
  it('answers every input governed, billed, and in the provider format', async () => {
    const seed = fuzzSeed();
    const parameters = fuzzParameters('proxy-providers');
    const tally = new Map<string, number>();
    let n = 0;
    const pools = {
      executions,
      boundBudgets: [target.tenant.budgetId, target.allowedBudgetId],
      unboundBudget: target.unboundBudgetId,
    };
    await fc.assert(
      fc.asyncProperty(providerRequests(pools), plans, async (request, plan) => {
        const id = `fz-${seed}-${++n}`;
        upstream.plan(id, plan);
        const raw = { ...request.raw, headers: [...request.raw.headers, ['x-request-id', id] as const] };
        // A stalled upstream answer keeps the agent waiting: it gives up, as agents do.
        const abortAfterMs = request.abortAfterMs ?? (plan.fault.kind === 'hang' ? 100 : undefined);
        const answer = await exchange(requestBytes(raw), {
          port: target.proxyPort,
          ...(request.connect !== undefined ? { connect: request.connect } : {}),
          ...(abortAfterMs !== undefined ? { abortAfterMs } : {}),
          timeoutMs: EXCHANGE_TIMEOUT_MS,
        });
        const key = `${answer.status ?? (answer.aborted ? 'aborted' : 'none')} ${refusalCode(answer) ?? ''}`.trim();
        tally.set(key, (tally.get(key) ?? 0) + 1);
        const note = `${request.summary.slice(0, 1500)}\n  upstream plan ${JSON.stringify(plan).slice(0, 300)}`;
        const problems = answerProblems(id, request, plan, answer);
        // A client that left does not stop the call, and a request framed so that the parser refused
        // what followed it may be answered (400) before it is served: what reached the upstream
        // for these is checked once everything settled.
        const sent = request.raw.headers;
        if (answer.aborted || request.broken) inputs.set(id, { request, routed: request.routed, sent, note });
        else {
          const provider = request.routed;
          const billed = provider === null ? 0 : upstream.reached(id).filter((r) => billable(provider, r, sent)).length;
          problems.push(...reachedProblems(id, request.routed, request, sent, await settledEvents(id, billed)));
          inputs.set(id, { request: null, routed: request.routed, sent, note });
          upstream.release(id);
        }
        if (problems.length > 0)
          throw new Error(
            `${id}: ${request.summary}\n  upstream plan ${JSON.stringify(plan)}\n  answer ${answer.status} ${answer.body.toString('utf8', 0, 300)}\n  ${problems.join('\n  ')}`,
          );
      }),
      parameters,
    );
    process.stdout.write(`proxy-providers outcomes: ${JSON.stringify(Object.fromEntries([...tally].sort()))}\n`);
    expect(upstream.strays).toEqual([]);
    // The run exercised both sides: answered calls and refusals.
    expect([...tally.keys()].some((k) => k.startsWith('200'))).toBe(true);
    expect([...tally.keys()].some((k) => k.startsWith('4'))).toBe(true);
  }, 1_800_000);

  it('governed and charged once every call that reached the upstream, inputs whose client left included', async () => {
    const wrongs = () => {
      const wrong: string[] = [];
      for (const [id, { request, routed, sent, note }] of inputs) {
        const problems = reachedProblems(id, routed, request, sent, target.llmCalls.get(id) ?? []);
        if (problems.length > 0) wrong.push(`${id}: ${note}\n  ${problems.join('\n  ')}`);
      }
      return wrong;
    };
    // Calls whose client left settle after their drain (and the upstream's own pauses); a moment
    // more lets a double charge show.
    await new Promise((r) => setTimeout(r, DRAIN_MS + 500));
    const deadline = Date.now() + EVENT_WAIT_MS;
    while (wrongs().length > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    await new Promise((r) => setTimeout(r, 500));
    expect(target.llmCalls.size).toBeGreaterThan(0);
    expect([...target.llmCalls.keys()].filter((id) => !inputs.has(id))).toEqual([]);
    expect(wrongs()).toEqual([]);
  }, 60_000);

  it('leaves the proxy alive, ready, without unhandled failures or crash output', async () => {
    expect(await target.healthProblems()).toEqual([]);
  });
});
