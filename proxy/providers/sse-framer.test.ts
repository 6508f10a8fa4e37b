import { describe, expect, it } from 'vitest';
import { createSseFramer, type SseEvent } from './sse-framer.ts';

const enc = (s: string) => new TextEncoder().encode(s);
const dec = (b: Uint8Array) => new TextDecoder().decode(b);

function collect(hide: (e: SseEvent) => boolean = () => false) {
  const events: SseEvent[] = [];
  const framer = createSseFramer((e) => {
    events.push(e);
    return !hide(e);
  });
  return { events, framer };
}

describe('SSE framer', () => {
  it('emits whole events and holds back the incomplete tail', () => {
    const { events, framer } = collect();
    expect(dec(framer.push(enc('data: a\n\ndata: b')))).toBe('data: a\n\n');
    expect(events).toEqual([{ event: undefined, data: 'a' }]);
    expect(dec(framer.push(enc('\n\n')))).toBe('data: b\n\n');
    expect(events.map((e) => e.data)).toEqual(['a', 'b']);
  });

  it('reads event names, multi-line data and ignores comments', () => {
    const { events, framer } = collect();
    framer.push(enc(': keep-alive\n\nevent: x\ndata: 1\ndata:2\n\n'));
    expect(events).toEqual([{ event: 'x', data: '1\n2' }]);
  });

  it('counts a CRLF split across chunks once', () => {
    const { events, framer } = collect();
    const pieces = ['data: a\r', '\n\r', '\ndata: b\r\n', '\r\n'];
    const out = pieces.map((p) => dec(framer.push(enc(p)))).join('');
    expect(events.map((e) => e.data)).toEqual(['a', 'b']);
    expect(out).toBe(pieces.join(''));
  });

  it('accepts bare CR line endings', () => {
    const { events, framer } = collect();
    framer.push(enc('data: a\r\rdata: b\r\r'));
    expect(events.map((e) => e.data)).toEqual(['a', 'b']);
  });

  it('keeps a multi-byte character split between chunks intact', () => {
    const { events, framer } = collect();
    const bytes = enc('data: 漢字 ✓\n\n');
    for (const b of bytes) framer.push(Uint8Array.of(b));
    expect(events).toEqual([{ event: undefined, data: '漢字 ✓' }]);
  });

  it('leaves hidden events out of the forwarded bytes', () => {
    const { framer } = collect((e) => e.data === 'secret');
    expect(dec(framer.push(enc('data: a\n\ndata: secret\n\ndata: b\n\n')))).toBe('data: a\n\ndata: b\n\n');
  });

  it('releases an unterminated last event at the end', () => {
    const { events, framer } = collect();
    expect(framer.push(enc('data: tail')).length).toBe(0);
    expect(dec(framer.end())).toBe('data: tail');
    expect(events.map((e) => e.data)).toEqual(['tail']);
    expect(framer.closed).toBe(true);
  });

  it('frames an error event', () => {
    expect(dec(createSseFramer(() => true).errorFrame('error', { a: 1 }))).toBe('event: error\ndata: {"a":1}\n\n');
  });
});
