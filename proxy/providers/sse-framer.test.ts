import { describe, expect, it } from 'vitest';
import { isSvcError } from '../../core/errors/index.ts';
import { createSseFramer, formatSseEvent, type EventVerdict, type Framer, type SseEvent } from './sse-framer.ts';

const enc = (s: string) => new TextEncoder().encode(s);
const dec = (b: Uint8Array) => new TextDecoder().decode(b);

function collect(verdict: (e: SseEvent) => EventVerdict = () => true, limit?: number) {
  const events: SseEvent[] = [];
  const framer = createSseFramer((e) => {
    events.push(e);
    return verdict(e);
  }, limit);
  return { events, framer };
}

/** Everything one push lets through, joined. */
function pushed(framer: Framer, text: string | Uint8Array): string {
  return [...framer.push(typeof text === 'string' ? enc(text) : text)].map(dec).join('');
}

function svcCodeThrown(run: () => unknown): string | undefined {
  try {
    run();
  } catch (error) {
    return isSvcError(error) ? error.code : 'not an SvcError';
  }
  return undefined;
}

describe('SSE framer', () => {
  it('emits whole events and holds back the incomplete tail', () => {
    const { events, framer } = collect();
    expect(pushed(framer, 'data: a\n\ndata: b')).toBe('data: a\n\n');
    expect(events).toEqual([{ event: undefined, data: 'a' }]);
    expect(pushed(framer, '\n\n')).toBe('data: b\n\n');
    expect(events.map((e) => e.data)).toEqual(['a', 'b']);
  });

  it('yields each event of a chunk on its own, visiting the next only when asked', () => {
    const { events, framer } = collect();
    const steps = framer.push(enc('data: a\n\ndata: b\n\ndata: c\n\n'));
    expect(dec(steps.next().value as Uint8Array)).toBe('data: a\n\n');
    expect(events.map((e) => e.data)).toEqual(['a']);
    expect([...steps].map(dec)).toEqual(['data: b\n\n', 'data: c\n\n']);
    expect(events.map((e) => e.data)).toEqual(['a', 'b', 'c']);
  });

  it('reads event names, ids, multi-line data and ignores comments', () => {
    const { events, framer } = collect();
    pushed(framer, ': keep-alive\n\nevent: x\nid: 7\ndata: 1\ndata:2\n\n');
    expect(events).toEqual([{ event: 'x', id: '7', data: '1\n2' }]);
  });

  it('counts a CRLF split across chunks once', () => {
    const { events, framer } = collect();
    const pieces = ['data: a\r', '\n\r', '\ndata: b\r\n', '\r\n'];
    const out = pieces.map((p) => pushed(framer, p)).join('');
    expect(events.map((e) => e.data)).toEqual(['a', 'b']);
    expect(out).toBe(pieces.join(''));
  });

  it('accepts bare CR line endings', () => {
    const { events, framer } = collect();
    pushed(framer, 'data: a\r\rdata: b\r\r');
    expect(events.map((e) => e.data)).toEqual(['a', 'b']);
  });

  it('frames events of mixed line endings alike however the stream is split', () => {
    // Seeded, so a failure replays: events of one to three lines, each event ending its lines
    // one way (LF, CR or CRLF) and with a blank line, split into chunks at random places. The
    // LF of a CRLF split from its CR travels with the next frame: bytes are all passed on once.
    let seed = 7;
    const random = (n: number) => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed % n;
    };
    for (let round = 0; round < 200; round++) {
      const data: string[] = [];
      let text = '';
      for (let e = 1 + random(6); e > 0; e--) {
        const end = ['\n', '\r', '\r\n'][random(3)] as string;
        const lines = Array.from({ length: 1 + random(3) }, (_, l) => `é${'x'.repeat(random(40))}${l}`);
        data.push(lines.join('\n'));
        text += lines.map((line) => `data: ${line}${end}`).join('') + end;
      }
      const bytes = enc(text);
      const { events, framer } = collect();
      let out = '';
      for (let at = 0; at < bytes.length;) {
        const next = Math.min(bytes.length, at + 1 + random(90));
        out += pushed(framer, bytes.subarray(at, next));
        at = next;
      }
      expect(out + dec(framer.end())).toBe(text);
      expect(events.map((e) => e.data)).toEqual(data);
    }
  });

  it('keeps a multi-byte character split between chunks intact', () => {
    const { events, framer } = collect();
    for (const b of enc('data: 漢字 ✓\n\n')) pushed(framer, Uint8Array.of(b));
    expect(events).toEqual([{ event: undefined, data: '漢字 ✓' }]);
  });

  it('leaves hidden events out of the forwarded bytes and puts rewritten ones in their place', () => {
    const { framer } = collect((e) =>
      e.data === 'secret' ? false : e.data === 'old' ? formatSseEvent({ ...e, data: 'new' }) : true,
    );
    expect(pushed(framer, 'data: a\n\ndata: secret\n\nevent: m\nid: 3\ndata: old\r\n\r\ndata: b\n\n')).toBe(
      'data: a\n\nevent: m\nid: 3\ndata: new\n\ndata: b\n\n',
    );
  });

  it('releases an unterminated last event at the end', () => {
    const { events, framer } = collect();
    expect(pushed(framer, 'data: tail')).toBe('');
    expect(dec(framer.end())).toBe('data: tail');
    expect(events.map((e) => e.data)).toEqual(['tail']);
    expect(framer.closed).toBe(true);
  });

  it('frames an error event', () => {
    expect(dec(createSseFramer(() => true).errorFrame('error', { a: 1 }))).toBe('event: error\ndata: {"a":1}\n\n');
  });

  it('refuses an incomplete event that grows past the limit with SVC-SYS-9009, chunk by chunk', () => {
    const { events, framer } = collect(() => true, 64);
    expect(pushed(framer, 'data: ok\n\n')).toBe('data: ok\n\n');
    for (let i = 0; i < 5; i++) expect(pushed(framer, i === 0 ? 'data: ' : 'xxxxxxxxxx')).toBe('');
    expect(svcCodeThrown(() => pushed(framer, 'x'.repeat(20)))).toBe('SVC-SYS-9009');
    expect(events.map((e) => e.data)).toEqual(['ok']);
  });

  it('refuses a complete event larger than the limit even when it arrives in one chunk', () => {
    const { events, framer } = collect(() => true, 64);
    expect(svcCodeThrown(() => pushed(framer, `data: ${'x'.repeat(100)}\n\n`))).toBe('SVC-SYS-9009');
    expect(events).toEqual([]);
  });

  it('holds one copy of a large event however small the chunks (no quadratic rejoining)', () => {
    const { events, framer } = collect(() => true, 1 << 20);
    const big = `data: ${'y'.repeat(500_000)}\n\n`;
    const bytes = enc(big);
    const started = performance.now();
    for (let i = 0; i < bytes.length; i += 64) pushed(framer, bytes.subarray(i, i + 64));
    expect(events[0]?.data.length).toBe(500_000);
    // Rejoining on every chunk would copy ~2 GB here; one copy takes milliseconds.
    expect(performance.now() - started).toBeLessThan(5_000);
  });
});
