import { request, type Dispatcher } from 'undici';
import { SvcError } from '../../errors/index.ts';
import type { Evidence, JudgeInput, JudgeVerdictInput, SemanticJudge } from '../../policy/semantic-judge.ts';
import { maskSecret } from '../finding.ts';
import { JUDGE_PROMPT_VERSION, judgePrompt, LlmVerdictSchema, type JudgePrompt } from './judge-prompt.ts';
import type { Registry } from 'prom-client';
import { createLlmJudgeMetrics } from './llm-judge-metrics.ts';
import { TtlCache } from './ttl-cache.ts';

export const LLM_JUDGE_NAME = 'llm';

export type JudgeFailMode = 'closed' | 'open';
export type LlmFailure = 'timeout' | 'status' | 'unparseable' | 'budget' | 'network';

export interface LlmJudgeOptions {
  /** An OpenAI-compatible API's base URL (`https://api.openai.com/v1`, `http://vllm:8000/v1`). */
  readonly baseUrl: string;
  readonly model: string;
  /** The bearer key, read where the process keeps it (a key file); undefined sends none (a local server). */
  readonly apiKey: () => string | undefined;
  readonly timeoutMs: number;
  /** A failed judgement: `closed` fails (the engine resolves the condition fail-closed), `open` answers "not violated". */
  readonly failMode: JudgeFailMode;
  readonly cacheEntries: number;
  readonly cacheTtlMs: number;
  readonly maxTextChars: number;
  /**
   * What the judge may spend per UTC day for each tenant; beyond it that tenant's judgements fail
   * (reason `budget`), and no other tenant's.
   */
  readonly dailyBudgetUsd: number;
  /** The price of one call from the usage the endpoint reported. */
  readonly costUsd: (model: string, usage: { input: number; output: number }) => number;
  /** Where its metrics (calls, latency, cache hits and size, failures, spend) are registered. */
  readonly registry: Registry;
  readonly dispatcher?: Dispatcher;
  readonly now?: () => number;
}

export interface LlmJudge {
  /** The judge one tenant's conditions ask: its judgements are charged to that tenant's budget. */
  forTenant(tenant: string): SemanticJudge;
  /** What the tenant spent today (UTC), in USD. */
  spentTodayUsd(tenant: string): number;
  cacheSize(): number;
}

/** A provider's answer is small; a larger one is not a verdict. */
const MAX_ANSWER_BYTES = 256 * 1024;
const MAX_IN_FLIGHT = 1024;
const EXCERPT_CHARS = 80;
const DAY_MS = 86_400_000;

class JudgeFailure extends Error {
  readonly reason: LlmFailure;
  constructor(reason: LlmFailure, message: string) {
    super(message);
    this.reason = reason;
  }
}

/**
 * The LLM Semantic Judge: asks an OpenAI-compatible chat endpoint with a fixed, versioned prompt
 * (judge-prompt.ts) and reads a strictly parsed JSON verdict. It calls the endpoint directly
 * (undici), never through the agents' proxy path. Verdicts are cached by the hash of the canonical
 * request for `cacheTtlMs`, equal questions asked at once share one call, and every failure —
 * timeout, HTTP status, an answer that is not the schema, the daily budget spent — is resolved by
 * the fail mode.
 */
export function createLlmJudge(options: LlmJudgeOptions): LlmJudge {
  const now = options.now ?? Date.now;
  const cache = new TtlCache<JudgeVerdictInput>(options.cacheEntries, options.cacheTtlMs, now);
  const inFlight = new Map<string, Promise<JudgeVerdictInput>>();
  const url = `${options.baseUrl.replace(/\/+$/, '')}/chat/completions`;
  const metrics = createLlmJudgeMetrics(options.registry, () => cache.size);
  let spentDay = -1;
  /** Today's spend by tenant: one tenant's questions cannot use up another's judgements. */
  const spent = new Map<string, number>();

  function spentToday(tenant: string): number {
    const day = Math.floor(now() / DAY_MS);
    if (day !== spentDay) {
      spentDay = day;
      spent.clear();
    }
    return spent.get(tenant) ?? 0;
  }

  async function ask(prompt: JudgePrompt, tenant: string): Promise<JudgeVerdictInput> {
    if (options.dailyBudgetUsd > 0 && spentToday(tenant) >= options.dailyBudgetUsd)
      throw new JudgeFailure('budget', `daily budget of ${options.dailyBudgetUsd} USD spent for tenant ${tenant}`);
    const key = options.apiKey();
    const started = performance.now();
    let answer: unknown;
    try {
      const response = await request(url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...(key === undefined ? {} : { authorization: `Bearer ${key}` }),
        },
        body: prompt.body,
        signal: AbortSignal.timeout(options.timeoutMs),
        ...(options.dispatcher === undefined ? {} : { dispatcher: options.dispatcher }),
      });
      const text = await readCapped(response.body);
      if (response.statusCode !== 200)
        throw new JudgeFailure('status', `judge endpoint answered HTTP ${response.statusCode}`);
      answer = parseJson(text);
    } catch (error) {
      metrics.calls.inc({ outcome: 'failed' });
      metrics.latency.observe((performance.now() - started) / 1000);
      if (error instanceof JudgeFailure) throw error;
      const name = error instanceof Error ? error.name : '';
      if (name === 'TimeoutError' || name === 'AbortError')
        throw new JudgeFailure('timeout', `judge endpoint did not answer within ${options.timeoutMs} ms`);
      throw new JudgeFailure(
        'network',
        `judge endpoint unreachable (${error instanceof Error ? error.message : 'error'})`,
      );
    }
    metrics.calls.inc({ outcome: 'ok' });
    metrics.latency.observe((performance.now() - started) / 1000);
    meter(answer, tenant);
    return verdictOf(answer, prompt);
  }

  function meter(answer: unknown, tenant: string): void {
    const usage = (answer as { usage?: { prompt_tokens?: unknown; completion_tokens?: unknown } } | null)?.usage;
    const input = typeof usage?.prompt_tokens === 'number' ? usage.prompt_tokens : 0;
    const output = typeof usage?.completion_tokens === 'number' ? usage.completion_tokens : 0;
    if (input + output === 0) return;
    const usd = options.costUsd(options.model, { input, output });
    spent.set(tenant, spentToday(tenant) + usd);
    metrics.costUsd.inc(usd);
  }

  // A verdict on a text cut to the reading limit says so, and the engine then fails closed: the
  // rest of the text was never judged.
  async function judge(input: JudgeInput, tenant: string): Promise<JudgeVerdictInput> {
    const prompt = judgePrompt(input, options.model, options.maxTextChars);
    const verdict = await judgeWhole(input, prompt, tenant);
    return prompt.truncated ? { ...verdict, truncated: true } : verdict;
  }

  async function judgeWhole(input: JudgeInput, prompt: JudgePrompt, tenant: string): Promise<JudgeVerdictInput> {
    const cached = cache.get(prompt.key);
    if (cached !== undefined) {
      metrics.cacheHits.inc();
      return cached;
    }
    let pending = inFlight.get(prompt.key);
    if (pending === undefined) {
      pending = ask(prompt, tenant);
      if (inFlight.size < MAX_IN_FLIGHT) {
        inFlight.set(prompt.key, pending);
        const key = prompt.key;
        pending.then(
          (verdict) => {
            cache.set(key, verdict);
            inFlight.delete(key);
          },
          () => inFlight.delete(key),
        );
      }
    }
    try {
      return await pending;
    } catch (error) {
      const failure =
        error instanceof JudgeFailure
          ? error
          : new JudgeFailure('network', error instanceof Error ? error.message : '');
      metrics.failures.inc({ reason: failure.reason });
      if ((input.failMode ?? options.failMode) === 'open') return { violated: false, confidence: 0, evidence: [] };
      throw new SvcError('SVC-SYS-9001', `LLM semantic judge failed: ${failure.message}`, {
        judge: LLM_JUDGE_NAME,
        reason: failure.reason,
      });
    }
  }

  return {
    forTenant: (tenant) => ({
      name: LLM_JUDGE_NAME,
      version: JUDGE_PROMPT_VERSION,
      judge: (input) => judge(input, tenant),
    }),
    spentTodayUsd: spentToday,
    cacheSize: () => cache.size,
  };
}

async function readCapped(body: AsyncIterable<Uint8Array>): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.byteLength;
    if (size > MAX_ANSWER_BYTES) throw new JudgeFailure('unparseable', `judge answer over ${MAX_ANSWER_BYTES} bytes`);
    chunks.push(Buffer.from(chunk));
  }
  return Buffer.concat(chunks).toString('utf8');
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new JudgeFailure('unparseable', 'judge endpoint answered something other than JSON');
  }
}

/** The model's message as a verdict; anything but the schema, or a category not asked about, is a failure. */
function verdictOf(answer: unknown, prompt: JudgePrompt): JudgeVerdictInput {
  const choices = (answer as { choices?: unknown } | null)?.choices;
  const content = Array.isArray(choices)
    ? (choices[0] as { message?: { content?: unknown } } | undefined)?.message?.content
    : undefined;
  if (typeof content !== 'string') throw new JudgeFailure('unparseable', 'judge answer carries no message content');
  let raw: unknown;
  try {
    raw = JSON.parse(content);
  } catch {
    throw new JudgeFailure('unparseable', 'judge verdict is not JSON');
  }
  const parsed = LlmVerdictSchema.safeParse(raw);
  if (!parsed.success) throw new JudgeFailure('unparseable', 'judge verdict does not match its schema');
  const verdict = parsed.data;
  if (!verdict.violated) return { violated: false, confidence: verdict.confidence, evidence: [] };
  if (verdict.category === null || !prompt.allowed.includes(verdict.category))
    throw new JudgeFailure('unparseable', 'judge verdict names a category that was not asked about');
  return {
    violated: true,
    category: verdict.category,
    confidence: verdict.confidence,
    evidence: verdict.evidence.flatMap((e) => locate(e, prompt, verdict.category === 'DATA_EXFILTRATION')),
  };
}

/** A quote becomes evidence only where it occurs in what was judged: a model cannot cite text it invented. */
function locate(quoted: { field: string; quote: string }, prompt: JudgePrompt, secret: boolean): Evidence[] {
  if (quoted.quote === '') return [];
  for (const [field, text] of prompt.texts) {
    const start = text.indexOf(quoted.quote);
    if (start < 0) continue;
    const q = quoted.quote;
    const excerpt = secret ? maskSecret(q) : q.length > EXCERPT_CHARS ? `${q.slice(0, EXCERPT_CHARS - 1)}…` : q;
    return [{ field, start, end: start + q.length, signal: 'llm.verdict', excerpt }];
  }
  return [];
}
