import { RE2JS } from 're2js';
import type { JudgeInput, JudgeVerdict, SemanticJudge } from './semantic-judge.ts';

export const INTENT_CATEGORIES = ['DESTRUCTIVE', 'DATA_EXFILTRATION', 'SUSPICIOUS'] as const;
export type IntentCategory = (typeof INTENT_CATEGORIES)[number];

interface Signal {
  readonly pattern: string;
  /** How strongly one hit indicates the category; reported as the verdict's confidence. */
  readonly weight: number;
}

/**
 * The signals of each category. Patterns run on RE2 (linear time), so a hostile prompt
 * cannot slow the judge down, whatever its length.
 */
const SIGNALS: Readonly<Record<IntentCategory, readonly Signal[]>> = {
  DESTRUCTIVE: [
    {
      pattern: String.raw`\brm\s+(-[a-z]*r[a-z]*f|-[a-z]*f[a-z]*r|-r\s+-f|-f\s+-r|--recursive\s+--force|--force\s+--recursive)\b`,
      weight: 0.95,
    },
    { pattern: String.raw`\bdrop\s+(table|database|schema|index|collection)\b`, weight: 0.95 },
    { pattern: String.raw`\btruncate\s+table\b`, weight: 0.9 },
    { pattern: String.raw`\bdelete\s+from\s+[\w."\x60]+\s*(;|$)`, weight: 0.9 },
    { pattern: String.raw`\b(mkfs(\.\w+)?|format\s+[a-z]:|dd\s+if=\S+\s+of=/dev/)`, weight: 0.9 },
    { pattern: String.raw`\bgit\s+(push\s+(-f|--force)\b|reset\s+--hard\b|clean\s+-[a-z]*f)`, weight: 0.8 },
    { pattern: String.raw`\b(kubectl|helm)\s+(delete|uninstall)\b`, weight: 0.8 },
    {
      pattern: String.raw`\b(delete|remove|wipe|erase|destroy|purge)\s+(all|every|the\s+entire|the\s+whole)\b`,
      weight: 0.75,
    },
    { pattern: String.raw`\bdelete\s+from\b`, weight: 0.6 },
  ],
  DATA_EXFILTRATION: [
    {
      pattern: String.raw`\b(curl|wget)\b[^\n]*(\s-d\s*@|--data(-binary|-raw)?\s*@|-F\s*\S*=@|--upload-file|-T\s)`,
      weight: 0.9,
    },
    {
      pattern: String.raw`(/etc/(passwd|shadow)|\.ssh/id_[a-z0-9]+|\.aws/credentials|\.kube/config|\.env\b)`,
      weight: 0.85,
    },
    { pattern: String.raw`\b(scp|rsync)\s[^\n]*\s\S+@[\w.-]+:`, weight: 0.85 },
    { pattern: String.raw`\b(nc|ncat|netcat)\s+[^\n]*\d{2,5}\s*<`, weight: 0.85 },
    { pattern: String.raw`\bexfiltrat(e|ion|ing)\b`, weight: 0.9 },
    {
      pattern: String.raw`\b(send|upload|post|email|forward|leak|copy)\b[^\n]{0,60}\b(password|credential|secret|api[\s_-]?key|token|private\s+key|ssn|credit\s+card|customer\s+data|user\s+data)s?\b[^\n]{0,60}\b(to|into)\b`,
      weight: 0.8,
    },
    {
      pattern: String.raw`\b(dump|export)\s+(all|the\s+entire|every)\b[^\n]{0,40}\b(users?|customers?|records|database|table)\b`,
      weight: 0.7,
    },
  ],
  SUSPICIOUS: [
    {
      pattern: String.raw`\b(ignore|disregard|forget)\s+(all\s+)?(your\s+|the\s+)?(previous|prior|above|earlier)\s+(instructions|rules|prompts?)\b`,
      weight: 0.9,
    },
    { pattern: String.raw`\b(curl|wget)\b[^\n|]*\|\s*(sudo\s+)?(ba|z|da)?sh\b`, weight: 0.9 },
    { pattern: String.raw`(/dev/tcp/|\breverse\s+shell\b|\bbind\s+shell\b)`, weight: 0.9 },
    {
      pattern: String.raw`\b(bypass|disable|circumvent|evade)\s+(the\s+)?(security|guardrails?|policy|policies|audit(ing)?|logging|monitoring|safety)\b`,
      weight: 0.8,
    },
    { pattern: String.raw`\bjailbreak`, weight: 0.8 },
    { pattern: String.raw`\b(base64\s+(-d|--decode)[^\n]*\|\s*(ba)?sh|eval\s*\(\s*(atob|base64))`, weight: 0.85 },
    { pattern: String.raw`\b(chmod\s+(-R\s+)?777|sudo\s+su\b|privilege\s+escalation)`, weight: 0.7 },
  ],
};

const INTENT_KEYWORDS: ReadonlyArray<readonly [string, IntentCategory]> = [
  ['DESTRUCT', 'DESTRUCTIVE'],
  ['EXFILTRAT', 'DATA_EXFILTRATION'],
  ['SUSPICIOUS', 'SUSPICIOUS'],
];

export interface CategoryHit {
  readonly category: IntentCategory;
  readonly confidence: number;
}

export interface KeywordJudge extends SemanticJudge {
  /** Every category the text shows, strongest signal per category. */
  classify(text: string): CategoryHit[];
}

/**
 * The built-in heuristic Semantic Judge: a keyword and pattern classifier for the categories
 * DESTRUCTIVE, DATA_EXFILTRATION and SUSPICIOUS. It understands no language; it recognises
 * known command and phrasing signals. An intent that names a category (or contains
 * "destruct", "exfiltrat", "suspicious") is checked against that category; any other intent
 * against all of them. Deployments wanting intent analysis plug in an LLM-backed judge
 * through the same `SemanticJudge` interface.
 */
export function createKeywordJudge(): KeywordJudge {
  const compiled = INTENT_CATEGORIES.map((category) => ({
    category,
    signals: SIGNALS[category].map((s) => ({
      regex: RE2JS.compile(s.pattern, RE2JS.CASE_INSENSITIVE | RE2JS.MULTILINE),
      weight: s.weight,
    })),
  }));

  function classify(text: string, only?: ReadonlySet<IntentCategory>): CategoryHit[] {
    const hits: CategoryHit[] = [];
    for (const { category, signals } of compiled) {
      if (only !== undefined && !only.has(category)) continue;
      let confidence = 0;
      for (const { regex, weight } of signals) {
        if (weight > confidence && regex.test(text)) confidence = weight;
      }
      if (confidence > 0) hits.push({ category, confidence });
    }
    return hits.sort((a, b) => b.confidence - a.confidence);
  }

  return {
    classify: (text) => classify(text),
    judge(input: JudgeInput): Promise<JudgeVerdict> {
      const top = classify(input.text, categoriesOf(input.intent))[0];
      const verdict: JudgeVerdict =
        top === undefined
          ? { violated: false, confidence: 0.5 }
          : { violated: true, category: top.category, confidence: top.confidence };
      return Promise.resolve(verdict);
    },
  };
}

function categoriesOf(intent: string): ReadonlySet<IntentCategory> | undefined {
  const upper = intent.toUpperCase();
  const named = new Set<IntentCategory>();
  for (const [keyword, category] of INTENT_KEYWORDS) if (upper.includes(keyword)) named.add(category);
  return named.size > 0 ? named : undefined;
}
