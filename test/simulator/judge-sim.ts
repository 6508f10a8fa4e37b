import type { ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { JUDGE_PROMPT_MARKER } from '../../core/brain/index.ts';
import { sendJson } from './sse-writer.ts';

/**
 * Judge mode: a chat request whose system prompt is the Semantic Judge's answers as a judge
 * would, deterministically, from markers in the judged action:
 * - a phrase of the table below that shows an asked category → violated, confidence 0.9, the phrase as evidence;
 * - a tenant category → violated when the action contains one of its examples verbatim;
 * - `sim-judge:slow=<ms>` → the answer waits that long (timeouts);
 * - `sim-judge:garbage` → the message is not JSON; `sim-judge:off-schema` → JSON of another shape;
 * - `sim-judge:other-category` → a verdict naming a category that was not asked about;
 * - anything else → not violated.
 */
const PHRASES: Readonly<Record<string, RegExp>> = {
  DESTRUCTIVE: /drop table|rm -rf|truncate table|wipe the (?:disk|database)/i,
  DATA_EXFILTRATION: /\.aws\/credentials|id_rsa|send the (?:keys|secrets)/i,
  SUSPICIOUS: /ignore (?:all )?previous instructions|base64 -d \| sh/i,
};

interface JudgeDocument {
  categories: string[];
  category_definition?: { examples: string[] };
  text: string;
  tool_args?: string;
}

export function isJudgePrompt(body: Record<string, unknown>): boolean {
  const messages = body.messages;
  if (!Array.isArray(messages)) return false;
  const first = messages[0] as { role?: unknown; content?: unknown } | undefined;
  return first?.role === 'system' && typeof first.content === 'string' && first.content.startsWith(JUDGE_PROMPT_MARKER);
}

export async function answerJudge(
  res: ServerResponse,
  body: Record<string, unknown>,
  bodyBytes: number,
): Promise<void> {
  const messages = body.messages as { content: string }[];
  const doc = JSON.parse(messages[1]?.content ?? '{}') as JudgeDocument;
  const seen = `${doc.text}\n${doc.tool_args ?? ''}`;
  const slow = /sim-judge:slow=(\d+)/.exec(seen);
  if (slow !== null) {
    // A client that gave up closes the connection: the wait ends with it, no timer outlives the test.
    const gone = new AbortController();
    res.once('close', () => gone.abort());
    await sleep(Number(slow[1]), undefined, { signal: gone.signal }).catch(() => undefined);
  }
  if (res.destroyed) return;
  const content = seen.includes('sim-judge:garbage')
    ? 'I think this looks fine.'
    : JSON.stringify(
        seen.includes('sim-judge:off-schema')
          ? { verdict: 'deny' }
          : seen.includes('sim-judge:other-category')
            ? { violated: true, category: 'HARMLESS', confidence: 1, evidence: [] }
            : verdictFor(doc, seen),
      );
  sendJson(res, 200, {
    id: 'chatcmpl-judge',
    object: 'chat.completion',
    created: 1_700_000_000,
    model: typeof body.model === 'string' ? body.model : 'unknown-model',
    choices: [{ index: 0, message: { role: 'assistant', content, refusal: null }, finish_reason: 'stop' }],
    usage: {
      prompt_tokens: Math.ceil(bodyBytes / 4),
      completion_tokens: 40,
      total_tokens: Math.ceil(bodyBytes / 4) + 40,
    },
  });
}

function verdictFor(doc: JudgeDocument, seen: string): Record<string, unknown> {
  for (const category of doc.categories) {
    const examples = doc.category_definition?.examples;
    const quote =
      examples !== undefined
        ? examples.find((e) => seen.includes(e))
        : PHRASES[category] === undefined
          ? undefined
          : PHRASES[category].exec(seen)?.[0];
    if (quote === undefined) continue;
    const field = doc.text.includes(quote) ? 'text' : 'tool_args';
    return { violated: true, category, confidence: 0.9, evidence: [{ field, quote }] };
  }
  return { violated: false, category: null, confidence: 0.1, evidence: [] };
}
