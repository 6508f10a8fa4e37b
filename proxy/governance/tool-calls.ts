import { sequenceOf, sequencePayload } from '../../core/brain/index.ts';
import type { OutboxRoom } from '../../core/outbox/outbox.ts';
import { whileInflight, type LocalEnvelope } from '../envelopes/index.ts';
import type { ToolCall } from '../providers/index.ts';
import type { GovernanceDeps } from './governance-deps.ts';
import type { GateVerdict, Holding, MadeOnRead } from './policy-gate.ts';
import { MAX_BODY_DEPTH } from './read-body.ts';
import { parseStrictJson } from './strict-json.ts';
import { stringsOf, toolHosts } from './tool-hosts.ts';

/**
 * Who asked for a tool: the model in its answer, an MCP client, a request that declares a
 * built-in tool, or a stored answer read back.
 */
export type ToolSource = 'model' | 'mcp' | 'declared' | 'stored';

/**
 * The history's one scope at the proxy: the sidecar, not the execution. The executions of a pod
 * share its memory and files, so a secret read in one can be sent by another, and an agent names
 * its executions itself.
 */
const SIDECAR = 'sidecar';

/**
 * Evaluates one tool call as `tool:<name>` with its arguments in the context as `tool_args`
 * (the JSON text the model or the MCP client sent), so a SEMANTIC condition judges what the
 * tool will do, and the sidecar's earlier allowed tool calls as `recent_actions`, so the judge's
 * sequence rules and the tenant's `sequence` conditions see what it does after what
 * (docs/brain.md, Immune System). Counts it into the anomaly baselines (an MCP client's, counted
 * earlier, aside). Records it as a `tool.call` event whatever the verdict (into
 * `room` when room was held for it), and on a refusal publishes the violation (and ends the
 * envelope for TERMINATE). Given `held`, a call that needs an approval waits for it (until the
 * signal aborts); without, it is refused.
 */
export async function governToolCall(
  deps: GovernanceDeps,
  envelope: LocalEnvelope,
  call: ToolCall,
  source: ToolSource,
  context: Record<string, unknown>,
  held?: Holding,
  room?: OutboxRoom,
): Promise<GateVerdict> {
  const { name } = call;
  // An MCP client's call was counted before its envelope's pause was read (proxy/mcp).
  if (source !== 'mcp') deps.anomalies.observe(envelope);
  const recent = deps.history.recent(SIDECAR);
  const read = toolContext(call, source, context);
  const verdict: GateVerdict =
    'refusal' in read
      ? read.refusal
      : await deps.gate.checkJudged(
          `tool:${name}`,
          { ...read.judged, ...(recent.length === 0 ? {} : { recent_actions: recent }) },
          held,
          read.made,
        );
  // Only what was let through happened: a refused call is no first half of a sequence.
  if (verdict.allowed && 'judged' in read)
    deps.history.record(
      SIDECAR,
      { action: `tool:${name}`, toolName: name, toolArgs: read.judged.tool_args },
      deps.gate.sequences(),
    );
  deps.metrics.toolCalls.inc({ source, decision: verdict.allowed ? 'allowed' : 'blocked' });
  void deps.recorder.usage(
    envelope,
    {
      eventType: 'tool.call',
      model: null,
      tokens: { input: 0, output: 0 },
      costUsd: 0,
      payload: { tool: name, source, decision: verdict.result?.decision ?? 'DENY', blocked: !verdict.allowed },
    },
    room,
  );
  // A sequence that decided is a detection of the Immune System: the control plane keeps it.
  const sequence = verdict.result === null ? undefined : sequenceOf(verdict.result);
  if (sequence !== undefined && verdict.result !== null) {
    void deps.recorder.usage(envelope, {
      eventType: 'immune.sequence',
      model: null,
      tokens: { input: 0, output: 0 },
      costUsd: 0,
      payload: sequencePayload(sequence, `tool:${name}`, verdict.result),
    });
  }
  if (!verdict.allowed) refused(deps, envelope, `tool:${name}`, verdict);
  return verdict;
}

/**
 * Judges a tool call counted among the envelope's calls in flight. Given `holdBytes` (what the
 * wait keeps: the request, and the answer held with it), one that needs an approval waits until
 * it is decided (holding the model's answer, or the MCP call), the wait
 * ending early when the client leaves or the envelope ends; without, it is refused at once and no
 * approval is opened.
 */
export function governHeldToolCall(
  deps: GovernanceDeps,
  envelope: LocalEnvelope,
  call: ToolCall,
  source: ToolSource,
  context: Record<string, unknown>,
  client: AbortSignal,
  holdBytes: number | null,
  room?: OutboxRoom,
): Promise<GateVerdict> {
  return whileInflight(envelope, (ended) =>
    governToolCall(
      deps,
      envelope,
      call,
      source,
      context,
      holdBytes === null ? undefined : { signal: () => AbortSignal.any([client, ended]), bytes: holdBytes },
      room,
    ),
  );
}

/**
 * Arguments as the tool will read them, decoded once: JSON written again, so that an escape
 * (`rm \u002drf`, `https:\/\/`) hides nothing from a text condition, and the value, in whose
 * strings hosts are read; text that is not JSON (a custom tool's input) as it is. JSON that gives
 * a key twice (a parser keeps the last, another the first, so the judge and the tool could read
 * different commands) or nests too deep to be written again whole cannot be judged: why not.
 */
function readArguments(args: string): { text: string; value: unknown } | { unjudgeable: string } {
  const parsed = parseStrictJson(args, { maxDepth: MAX_BODY_DEPTH });
  if (parsed.ok) return { text: JSON.stringify(parsed.value), value: parsed.value };
  if (parsed.fault === 'syntax') return { text: args, value: args };
  return { unjudgeable: parsed.reason };
}

/**
 * An action's evaluation context and the fields made only when a rule reads them, or the
 * refusal of one that cannot be judged.
 */
export type Judgeable<C extends Record<string, unknown> = Record<string, unknown>> =
  { judged: C; made?: MadeOnRead } | { refusal: GateVerdict };

/**
 * The evaluation context of a tool call; `tool_hosts`, the hosts its arguments name (absent when
 * there are none; read only when a rule reads it, as the arguments' every string and command is
 * read), lets a rule name the destinations it allows. Its arguments are
 * its `input_text` too, the text an agent gives the control plane's evaluate for a tool, so a
 * content rule written there (`tool:shell`, `input_text contains "rm -rf"`) decides here alike.
 * A call whose arguments cannot be judged as the tool reads them gets its refusal instead.
 */
export function toolContext(
  call: ToolCall,
  source: ToolSource,
  context: Record<string, unknown>,
): Judgeable<Record<string, unknown> & { tool_args: string; input_text: string }> {
  const args = readArguments(call.arguments);
  if ('unjudgeable' in args) {
    return {
      refusal: {
        allowed: false,
        result: null,
        code: 'SVC-SYS-9002',
        message: `tool call ${call.name} refused: its arguments cannot be judged as the tool reads them (${args.unjudgeable})`,
        terminate: false,
      },
    };
  }
  const { value } = args;
  return {
    judged: {
      ...context,
      tool_name: call.name,
      tool: call.name,
      tool_args: args.text,
      input_text: args.text,
      source,
    },
    made: {
      tool_hosts: () => {
        const hosts = toolHosts(stringsOf(value));
        return hosts.length === 0 ? undefined : hosts;
      },
    },
  };
}

/** The verdict on a tool call read by `toolContext`, at once: one that needs an approval is refused. */
export function checkToolCall(deps: GovernanceDeps, action: string, read: Judgeable): GateVerdict {
  return 'refusal' in read ? read.refusal : deps.gate.check(action, read.judged, read.made);
}

/** Publishes a policy refusal; a TERMINATE policy also ends the envelope. */
export function refused(deps: GovernanceDeps, envelope: LocalEnvelope, action: string, verdict: GateVerdict): void {
  void deps.recorder.violation(envelope, {
    policy_id: verdict.result?.matched_policy ?? '',
    rule_id: verdict.result?.matched_rule ?? null,
    denied_action: action,
    decision: verdict.result?.decision ?? 'DENY',
    message: verdict.message,
    ...(verdict.result?.semantic === undefined ? {} : { semantic: verdict.result.semantic }),
  });
  if (
    verdict.terminate &&
    deps.envelopes.end(envelope.envelopeId, { status: 'POLICY_VIOLATION', reason: verdict.message })
  ) {
    void deps.recorder.ended(envelope, 'POLICY_VIOLATION', verdict.message);
  }
}
