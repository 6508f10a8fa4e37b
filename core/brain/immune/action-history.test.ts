import { describe, expect, it } from 'vitest';
import { ActionHistory } from './action-history.ts';

describe('ActionHistory', () => {
  it('keeps each execution its own recent calls, inside the window, newest last', () => {
    let now = 1000;
    const history = new ActionHistory({ windowMs: 100, maxExecutions: 10, now: () => now });
    history.record('a', 'tool:read_file', 'read_file', '{"path":"x"}');
    now += 60;
    history.record('a', 'tool:http_post', 'http_post', '{}');
    history.record('b', 'tool:search', 'search', '{}');
    expect(history.recent('a').map((r) => r.tool_name)).toEqual(['read_file', 'http_post']);
    expect(history.recent('b').map((r) => r.tool_name)).toEqual(['search']);
    now += 50;
    expect(history.recent('a').map((r) => r.tool_name)).toEqual(['http_post']);
    expect(history.recent('unknown')).toEqual([]);
  });

  it('is bounded in calls per execution, in argument length and in executions', () => {
    const history = new ActionHistory({ windowMs: 60_000, maxExecutions: 2 });
    for (let i = 0; i < 40; i++) history.record('a', 'tool:t', `t${i}`, 'x'.repeat(10_000));
    const kept = history.recent('a');
    expect(kept).toHaveLength(16);
    expect(kept.at(-1)?.tool_name).toBe('t39');
    expect(kept[0]?.tool_args.length).toBe(2048);
    history.record('b', 'tool:t', 't', '{}');
    history.record('c', 'tool:t', 't', '{}');
    expect(history.recent('a')).toEqual([]);
  });
});
