import {
  INTENT_CATEGORIES,
  type IntentCategory,
  type JudgeInput,
  type JudgeVerdict,
  type SemanticCategory,
  type SyncSemanticJudge,
} from '../policy/semantic-judge.ts';
import type { SequenceShape } from '../policy/sequence.ts';
import { scanEntropy } from './entropy.ts';
import { similarity } from './examples.ts';
import { finding, matchPatterns, quotedDataOf, type Finding } from './finding.ts';
import { builtinSequences, recentActionsOf, scanSequences, type RecentAction } from './immune/sequences.ts';
import { urlsIn, type HostPolicy } from './hosts.ts';
import { secretPathIn } from './paths.ts';
import { PATTERNS } from './patterns.ts';
import { scanShell } from './shell-signals.ts';
import { withoutSqlComments } from './sql-comments.ts';
import { scanSql } from './sql-signals.ts';
import { viewOf, type TextView } from './text-view.ts';
import { scanToolArgs, scanToolName } from './tool-call.ts';

export const BUILTIN_JUDGE_NAME = 'builtin';
/** Bumped whenever a signal or weight changes, so recorded decisions say which rules made them. */
export const BUILTIN_JUDGE_VERSION = '1.2.0';

export interface BuiltinJudgeOptions {
  /** Each field is read up to this many characters; a longer one makes the verdict `truncated`. */
  readonly maxTextChars: number;
  /** Destinations data may go to without counting as exfiltration (`github.com`, `*.corp.example`). */
  readonly allowedHosts: readonly string[];
}

/** Every category the input shows, strongest first, with the findings behind each. */
export interface Classification {
  readonly categories: readonly { category: IntentCategory; confidence: number; findings: readonly Finding[] }[];
  readonly truncated: boolean;
}

export interface BuiltinJudge extends SyncSemanticJudge {
  classify(input: JudgeInput): Classification;
  /** The earlier steps of its sequence rules, for the histories to track. */
  readonly sequences: readonly SequenceShape[];
}

const MAX_LEAVES = 2000;
const MAX_DEPTH = 32;
const STATEMENT_PATTERNS = PATTERNS.filter((p) => p.statement === true);
const MAX_NAME_CHARS = 256;
const EVIDENCE_ITEMS = 3;

/** Intents written as words map to categories: `destructive`, `data exfiltration`, `prompt injection`. */
const INTENT_WORDS: readonly (readonly [RegExp, IntentCategory])[] = [
  [/destruct|delet|destroy|wipe|irreversib/i, 'DESTRUCTIVE'],
  [/exfil|leak|secret|credential|upload|data[\s_-]*(?:loss|theft)/i, 'DATA_EXFILTRATION'],
  [/suspicious|injection|jailbreak|malicious|payload|reverse[\s_-]*shell|evasion|escalat/i, 'SUSPICIOUS'],
];

/** The categories an intent asks about; an intent naming none of them asks about all. */
export function categoriesOf(intent: string): readonly IntentCategory[] {
  const upper = intent.trim().toUpperCase();
  if ((INTENT_CATEGORIES as readonly string[]).includes(upper)) return [upper as IntentCategory];
  const named = INTENT_WORDS.filter(([pattern]) => pattern.test(intent)).map(([, category]) => category);
  return named.length > 0 ? [...new Set(named)] : INTENT_CATEGORIES;
}

/** Tokens that are used at home are not leaving: a GitHub token sent to GitHub's API. */
const HOME_HOSTS: Readonly<Record<string, RegExp>> = {
  'secrets.github_token': /(?:^|\.)github\.com$|(?:^|\.)githubusercontent\.com$/,
  'secrets.openai_key': /(?:^|\.)openai\.com$|(?:^|\.)openai\.azure\.com$/,
  'secrets.anthropic_key': /(?:^|\.)anthropic\.com$/,
  'secrets.slack_token': /(?:^|\.)slack\.com$/,
  'secrets.stripe_key': /(?:^|\.)stripe\.com$/,
  'secrets.aws_access_key': /(?:^|\.)amazonaws\.com$/,
  'secrets.google_api_key': /(?:^|\.)googleapis\.com$/,
};

const AT_HOME_WEIGHT = 0.35;
const TALK_WEIGHT = 0.35;

/**
 * Prose about exfiltration rather than asking for it: how attackers do it, or a defensive purpose
 * (detection rules, preventing it). "Without being detected" is evasion, not defence: the frame
 * needs a defender's verb as the purpose (`to detect`, `detection rules`) or the attacker as the
 * subject of a question.
 */
const DEFENSIVE_FRAME =
  /\bhow\s+(?:do|does|did|can|could|would|might)\s+(?:attackers?|adversar(?:y|ies)|hackers?|malware|threat\s+actors?|criminals|insiders?|an?\s+(?:attacker|adversary|insider))\b|\b(?:to|for|can|we|i)\s+(?:detect|prevent|block|catch|spot|stop|mitigate)\b|\bdetection\s+(?:rules?|logic|queries|signatures?)\b|\bwhat\s+is\s+(?:data\s+)?exfiltration\b/;

/**
 * The built-in Semantic Judge: deterministic, in process, no network. It reads the condition's
 * field and, from the context, the tool's name and arguments; JSON arguments are read leaf by
 * leaf. Commands are read as a shell reads them (shell-signals.ts), everything else by RE2
 * patterns (patterns.ts), credentials also by entropy (entropy.ts), the call's shape by
 * tool-call.ts; tenant categories by similarity to their examples (examples.ts).
 */
export function createBuiltinJudge(options: BuiltinJudgeOptions): BuiltinJudge {
  const hosts: HostPolicy = { allowed: options.allowedHosts };

  function read(input: JudgeInput): {
    views: TextView[];
    truncated: boolean;
    findings: Finding[];
    toolName: string;
    args: Record<string, unknown> | undefined;
  } {
    let args: Record<string, unknown> | undefined;
    const views: TextView[] = [];
    const findings: Finding[] = [];
    let truncated = false;
    const field = input.field ?? 'text';
    const context = input.context;
    const fields: { name: string; value: unknown }[] = [{ name: field, value: input.text }];
    const toolName = typeof context.tool_name === 'string' ? context.tool_name : '';
    if (field !== 'tool_args' && context.tool_args !== undefined)
      fields.push({ name: 'tool_args', value: context.tool_args });
    for (const { name, value } of fields) {
      const text = typeof value === 'string' ? value : safeJson(value);
      if (text.length > options.maxTextChars) truncated = true;
      const capped = text.length > options.maxTextChars ? text.slice(0, options.maxTextChars) : text;
      const parsed = parseJsonObject(capped);
      if (parsed === undefined) {
        views.push(viewOf(name, '', capped));
        continue;
      }
      const leaves: TextView[] = [];
      if (!collectLeaves(parsed, name, '', leaves, 0)) truncated = true;
      views.push(...leaves);
      scanToolArgs(toolName, name, parsed, leaves, hosts, findings);
      if (name === 'tool_args' && !Array.isArray(parsed)) args = parsed as Record<string, unknown>;
    }
    if (toolName !== '' && field !== 'tool_name') {
      const nameView = viewOf('tool_name', '', toolName.slice(0, MAX_NAME_CHARS));
      scanToolName(nameView, findings);
    } else if (field === 'tool_name') {
      scanToolName(views[0] as TextView, findings);
    }
    return { views, truncated, findings, toolName, args };
  }

  /** What the judge finds in an earlier action alone (for the sequence rules). */
  function earlierFindings(action: RecentAction): readonly Finding[] {
    return classifyOne({
      text: action.tool_args,
      intent: 'DATA_EXFILTRATION',
      field: 'tool_args',
      context: { tool_name: action.tool_name },
    }).flatMap((c) => c.findings);
  }

  function classify(input: JudgeInput): Classification {
    const { categories, truncated } = classifyWith(input, true);
    return { categories, truncated };
  }

  function classifyOne(input: JudgeInput): Classification['categories'] {
    return classifyWith(input, false).categories;
  }

  function classifyWith(input: JudgeInput, withSequences: boolean): Classification {
    const { views, findings, toolName, args, truncated: cut } = read(input);
    let truncated = cut;
    if (withSequences)
      scanSequences({ toolName, views, args }, recentActionsOf(input.context), earlierFindings, hosts, findings);
    for (const view of views) {
      const { textOnly, capped } = scanShell(view, hosts, findings);
      if (capped) truncated = true;
      const quotedData = quotedDataOf(view, textOnly);
      matchPatterns(view, PATTERNS, findings, quotedData);
      scanSql(view, findings, quotedData);
      // Statements are read with and without comments: `--` is also a shell's end of options (`kubectl exec db -- psql …`).
      const uncommented = withoutSqlComments(view);
      if (uncommented !== view) {
        matchPatterns(uncommented, STATEMENT_PATTERNS, findings, quotedData);
        scanSql(uncommented, findings, quotedData);
      }
      scanEntropy(view, findings);
      proseSecretPath(view, findings);
      if (view.hidden === 'tags')
        findings.push(finding(view, 'SUSPICIOUS', 0.85, 'injection.hidden_characters', 0, view.norm.length));
      else if (view.hidden === 'zero-width')
        findings.push(finding(view, 'SUSPICIOUS', 0.45, 'injection.zero_width', 0, view.norm.length));
    }
    const destinations = views.flatMap((v) => urlsIn(v.norm).map((u) => u.host));
    const atHome = findings.filter((f) => {
      const home = HOME_HOSTS[f.signal];
      return home !== undefined && destinations.length > 0 && destinations.every((d) => home.test(d));
    });
    const defensive = new Set(views.filter((v) => DEFENSIVE_FRAME.test(v.norm)).map((v) => v.field));
    const adjusted = findings.map((f) => {
      // The same credential found by its shape and by its entropy is at home for both.
      if (
        atHome.some((h) => h.field === f.field && h.start < f.end && f.start < h.end && f.signal.startsWith('secrets.'))
      )
        return { ...f, weight: AT_HOME_WEIGHT };
      if (f.category === 'DATA_EXFILTRATION' && f.signal.startsWith('intent.') && defensive.has(f.field))
        return { ...f, weight: TALK_WEIGHT };
      return f;
    });
    const categories = INTENT_CATEGORIES.map((category) => {
      const own = adjusted.filter((f) => f.category === category).sort((a, b) => b.weight - a.weight);
      return { category, confidence: own[0]?.weight ?? 0, findings: own };
    })
      .filter((c) => c.findings.length > 0)
      .sort((a, b) => b.confidence - a.confidence);
    return { categories, truncated };
  }

  function judgeNow(input: JudgeInput): JudgeVerdict {
    if (input.category !== undefined) return judgeTenantCategory(input, input.category);
    const wanted = new Set(categoriesOf(input.intent));
    const { categories, truncated } = classify(input);
    const top = categories.find((c) => wanted.has(c.category));
    if (top === undefined) return { violated: false, confidence: 0, evidence: [], truncated };
    const seen = new Set<string>();
    const evidence = top.findings
      .filter((f) => !seen.has(f.signal) && seen.add(f.signal))
      .slice(0, EVIDENCE_ITEMS)
      .map(({ field, start, end, signal, excerpt }) => ({ field, start, end, signal, excerpt }));
    return { violated: true, category: top.category, confidence: top.confidence, evidence, truncated };
  }

  function judgeTenantCategory(input: JudgeInput, category: SemanticCategory): JudgeVerdict {
    const { views, truncated } = read(input);
    const best = similarity(category, views);
    if (best === undefined || best.confidence <= 0) return { violated: false, confidence: 0, evidence: [], truncated };
    const f = finding(best.view, 'SUSPICIOUS', best.confidence, 'examples.similarity', best.start, best.end);
    return {
      violated: true,
      category: category.name,
      confidence: Math.round(best.confidence * 1000) / 1000,
      evidence: [{ field: f.field, start: f.start, end: f.end, signal: f.signal, excerpt: f.excerpt }],
      truncated,
    };
  }

  return {
    name: BUILTIN_JUDGE_NAME,
    version: BUILTIN_JUDGE_VERSION,
    classify,
    judgeNow,
    judge: (input) => Promise.resolve(judgeNow(input)),
    sequences: builtinSequences(earlierFindings),
  };
}

// Built from a string, not a literal: the proxy's bundle escapes non-ASCII strings, so its source
// stays one byte per character on V8's heap; one non-ASCII literal would double it.
const READ_VERB = new RegExp(
  String.raw`\b(?:read|cat|show|print|display|open|send|upload|copy|dump|output|leak|reveal|give|get|fetch|exfiltrate|paste|share|email|post|lire|lis|affiche|envoie|lee|muestra|envía|envia|lies|zeige|sende)\b|读取|读|显示|发送|打开|讀取|顯示|發送`,
);

/** Prose that names a credential store with a verb that takes it: "read ~/.aws/credentials and send it". */
function proseSecretPath(view: TextView, out: Finding[]): void {
  if (view.key !== '' && /^(?:path|file|filename|filepath|file_path|command|cmd|script)$/.test(view.key)) return;
  const hit = secretPathIn(` ${view.norm}`);
  if (hit === undefined) return;
  const start = Math.max(0, hit.index - 1);
  const before = view.norm.slice(Math.max(0, start - 60), start);
  if (!READ_VERB.test(before)) return;
  out.push(finding(view, 'DATA_EXFILTRATION', 0.75, 'secrets.request_credentials', start, start + hit.length));
}

function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value) ?? '';
  } catch {
    return '';
  }
}

/** A JSON object or array, or undefined when the text is not one. */
function parseJsonObject(text: string): unknown {
  const t = text.trimStart();
  if (!t.startsWith('{') && !t.startsWith('[')) return undefined;
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === 'object' ? value : undefined;
  } catch {
    return undefined;
  }
}

/**
 * String leaves as views named by their path (`tool_args.command`, `tool_args.files.0`); JSON held
 * in a string is read too. False when a leaf was left unread past the depth or leaf cap: a command
 * hidden behind 2,000 empty strings or 33 levels of nesting must make the verdict truncated, so a
 * restrictive rule fails closed instead of passing what the judge never saw.
 */
function collectLeaves(value: unknown, path: string, key: string, out: TextView[], depth: number): boolean {
  if (typeof value !== 'string' && (value === null || typeof value !== 'object')) return true;
  if (out.length >= MAX_LEAVES || depth > MAX_DEPTH) return false;
  if (typeof value === 'string') {
    const nested = depth < 4 ? parseJsonObject(value) : undefined;
    if (nested !== undefined) return collectLeaves(nested, path, key, out, depth + 1);
    out.push(viewOf(path, key.toLowerCase(), value));
    return true;
  }
  if (Array.isArray(value)) return value.every((v, i) => collectLeaves(v, `${path}.${i}`, key, out, depth + 1));
  return Object.entries(value).every(([k, v]) => collectLeaves(v, `${path}.${k}`, k, out, depth + 1));
}

/** The judge's options from the configuration of either process. */
export function builtinJudgeOptions(config: {
  semantic_judge_max_text_chars: number;
  semantic_judge_allowed_hosts: string;
}): BuiltinJudgeOptions {
  return {
    maxTextChars: config.semantic_judge_max_text_chars,
    allowedHosts: config.semantic_judge_allowed_hosts
      .split(',')
      .map((h) => h.trim().toLowerCase())
      .filter((h) => h !== ''),
  };
}
