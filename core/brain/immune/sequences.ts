import { z } from 'zod';
import type { IntentCategory } from '../../policy/semantic-judge.ts';
import { matchInOrder, MAX_SEQUENCE_ACTIONS, type SequenceItem, type SequenceShape } from '../../policy/sequence.ts';
import { finding, type Finding } from '../finding.ts';
import { classifyDestination, urlsIn, type HostPolicy } from '../hosts.ts';
import type { TextView } from '../text-view.ts';

/**
 * One earlier action, as a history remembers it (core/brain/immune/action-history.ts): the
 * evaluation context carries them as `recent_actions`, oldest first, so that a judge can see a
 * sequence that no single action shows.
 */
export const RecentActionSchema = z.object({
  action: z.string().max(300),
  tool_name: z.string().max(256),
  tool_args: z.string(),
  /** Epoch milliseconds. */
  at: z.number(),
});
export type RecentAction = z.infer<typeof RecentActionSchema>;

/** The most actions a judge looks back at: as many as a history gives. */
export const MAX_RECENT_ACTIONS = MAX_SEQUENCE_ACTIONS;

/** The earlier actions in a context, newest last; malformed entries are skipped. */
export function recentActionsOf(context: Readonly<Record<string, unknown>>): RecentAction[] {
  const raw = context.recent_actions;
  if (!Array.isArray(raw)) return [];
  return raw.slice(-MAX_RECENT_ACTIONS).flatMap((a) => {
    const parsed = RecentActionSchema.safeParse(a);
    return parsed.success ? [parsed.data] : [];
  });
}

/** What a sequence rule knows of the action under judgement. */
export interface CurrentAction {
  readonly toolName: string;
  readonly views: readonly TextView[];
  /** The arguments, parsed, when they are a JSON object. */
  readonly args: Readonly<Record<string, unknown>> | undefined;
}

/** The findings of an earlier action, by the same judge. */
export type EarlierFindings = (action: RecentAction) => readonly Finding[];

/**
 * A sequence rule: earlier actions of some kinds, in order (`earlier`), then the action under
 * judgement of another (`then`): together they show `category` though none does alone. The
 * order is matched as a tenant's `sequence` condition is (core/policy/sequence.ts).
 */
interface SequenceRule {
  readonly signal: string;
  readonly category: IntentCategory;
  readonly weight: number;
  readonly earlier: readonly ((findings: readonly Finding[]) => boolean)[];
  /** The view of the current action that completes the sequence (the evidence), if it does. */
  readonly then: (current: CurrentAction, hosts: HostPolicy) => TextView | undefined;
}

const SECRET_READS = new Set(['secrets.read_credentials', 'secrets.read_system_file', 'secrets.dump_environment']);

const SENDING_TOOL = /(?:^|[_.:-])(?:post|send|upload|put|webhook|publish|submit)(?:$|[_.:-])/;
const BODY_KEYS = /^(?:body|data|json|payload|content|form|file|files|attachment|attachments|text|message)$/;
const UPLOAD_FLAGS = /(?:^|\s)(?:-d|--data(?:-\w+)?|-f|--form|-t|--upload-file|--post-file|--post-data)(?:[\s=]|$)/;

/** A send to a destination that is neither internal nor allowed: the view holding its URL. */
function outboundSend(current: CurrentAction, hosts: HostPolicy): TextView | undefined {
  const tool = current.toolName.toLowerCase();
  const args = current.args ?? {};
  const method = typeof args.method === 'string' ? args.method.toUpperCase() : '';
  const hasBody = Object.keys(args).some((k) => BODY_KEYS.test(k.toLowerCase()));
  for (const view of current.views) {
    const target = urlsIn(view.norm).find((u) => {
      const where = classifyDestination(u.hostAndPath, hosts);
      return where === 'external' || where === 'drop';
    });
    if (target === undefined) continue;
    const shellUpload = /\b(?:curl|wget|http|httpie)\b/.test(view.norm) && UPLOAD_FLAGS.test(view.norm);
    const toolSend = /^(?:GET|HEAD|OPTIONS)$/.test(method)
      ? false
      : /^(?:POST|PUT|PATCH)$/.test(method) || hasBody || SENDING_TOOL.test(tool);
    if (shellUpload || (view.key !== '' && toolSend)) return view;
  }
  return undefined;
}

const RULES: readonly SequenceRule[] = [
  {
    // A credential store read, then data sent out: the read was the first half of an exfiltration.
    signal: 'sequence.secret_read_then_send',
    category: 'DATA_EXFILTRATION',
    weight: 0.9,
    earlier: [(findings) => findings.some((f) => SECRET_READS.has(f.signal) && f.weight >= 0.55)],
    then: outboundSend,
  },
];

/** Applies the sequence rules to the action under judgement and the earlier ones. */
export function scanSequences(
  current: CurrentAction,
  recent: readonly RecentAction[],
  earlier: EarlierFindings,
  hosts: HostPolicy,
  out: Finding[],
): void {
  if (recent.length === 0) return;
  for (const rule of RULES) {
    const view = rule.then(current, hosts);
    if (view === undefined) continue;
    if (
      !matchInOrder(
        recent,
        rule.earlier.map((step) => (a: RecentAction) => step(earlier(a))),
      )
    )
      continue;
    out.push(finding(view, rule.category, rule.weight, rule.signal, 0, view.norm.length));
  }
}

/**
 * The rules' earlier steps as a history tracks them (`builtin:<signal>`), each tested on what the
 * judge finds in the earlier action alone.
 */
export function builtinSequences(earlier: EarlierFindings): readonly SequenceShape[] {
  return RULES.map((rule) => ({
    key: `builtin:${rule.signal}`,
    steps: rule.earlier.map((step) => (item: SequenceItem) => {
      const action = RecentActionSchema.safeParse(item);
      return action.success && step(earlier(action.data));
    }),
  }));
}
