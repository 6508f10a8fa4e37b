import fc from 'fast-check';
import type { JsMsg } from 'nats';
import { toJsMsg } from 'nats/lib/jetstream/jsmsg.js';
import { MsgHdrsImpl } from 'nats/lib/nats-base-client/headers.js';
import { MsgImpl } from 'nats/lib/nats-base-client/msg.js';
import type { Publisher } from 'nats/lib/nats-base-client/core.js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { natsMsgId } from './msg-id-header.ts';

/** A message as the client makes it from what the server sent: its header block, then `{}`. */
function received(block: Uint8Array): JsMsg {
  const data = Buffer.concat([block, Buffer.from('{}')]);
  const subject = Buffer.from('svc.t.events.llm.call');
  const arg = { subject, reply: Buffer.from('$JS.ACK.s.c.1.1.1.1.0'), sid: 1, hdr: block.length, size: data.length };
  return toJsMsg(new MsgImpl(arg, data, {} as Publisher));
}

/** What the client itself reads, or what it throws. */
function outcome(read: () => string): string {
  try {
    return `value ${read()}`;
  } catch (error) {
    return `throws ${(error as Error).message}`;
  }
}

const clientMsgId = (msg: JsMsg) => msg.headers?.get('Nats-Msg-Id') ?? '';

/** Mostly the block publishers write, and near misses of it. */
const often = <T>(common: T, ...others: T[]) =>
  fc.oneof({ arbitrary: fc.constant(common), weight: 3 }, fc.constantFrom(...others));
const line = fc.tuple(
  often('Nats-Msg-Id', 'nats-msg-id', 'Nats-Msg-Id ', ' Nats-Msg-Id', 'X-Other', 'Bad Key'),
  often(': ', ':', ':  ', ':\t', ''),
  fc.oneof(
    fc.uuid().map((id) => `event:acme:${id}`),
    fc.string(),
    fc.string({ unit: 'binary' }),
    fc.string({ unit: 'grapheme' }),
    fc.constant(''),
  ),
);
const block = fc.record({
  status: often('NATS/1.0', 'NATS/1.0 404 No Messages', 'NATS/1.1', 'NATS/1.0 '),
  lines: fc.oneof(
    { arbitrary: line.map((one) => [one]), weight: 3 },
    { arbitrary: fc.array(line, { maxLength: 3 }), weight: 1 },
  ),
  end: often('\r\n\r\n', '\r\n', '\r\n\r\n\r\n', '\r\n\r\nBad Key: x'),
});

describe('natsMsgId', () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it('reads what the client reads from any header block, or throws what it throws', () => {
    fc.assert(
      fc.property(block, ({ status, lines, end }) => {
        const text = [status, ...lines.map(([key, sep, value]) => `${key}${sep}${value}`)].join('\r\n') + end;
        const bytes = Buffer.from(text);
        expect(outcome(() => natsMsgId(received(bytes)))).toBe(outcome(() => clientMsgId(received(bytes))));
      }),
      { numRuns: 2_000 },
    );
  });

  it('reads the block a publisher writes in place, without the client decoding it', () => {
    const decode = vi.spyOn(MsgHdrsImpl, 'decode');
    fc.assert(
      fc.property(fc.uuid(), fc.constantFrom(' ', '', '  '), (id, space) => {
        const msg = received(Buffer.from(`NATS/1.0\r\nNats-Msg-Id:${space}event:acme:${id}\r\n\r\n`));
        expect(natsMsgId(msg)).toBe(`event:acme:${id}`);
      }),
    );
    expect(decode).not.toHaveBeenCalled();
  });

  it('leaves any other block to the client: not UTF-8, other headers, a status, no headers at all', () => {
    const decode = vi.spyOn(MsgHdrsImpl, 'decode');
    const id = Buffer.concat([
      Buffer.from('NATS/1.0\r\nNats-Msg-Id: a'),
      Buffer.from([0xff]),
      Buffer.from('b\r\n\r\n'),
    ]);
    expect(natsMsgId(received(id))).toBe('a\ufffdb');
    expect(natsMsgId(received(Buffer.from('NATS/1.0\r\nNats-Msg-Id: a\r\nX-Other: b\r\n\r\n')))).toBe('a');
    expect(natsMsgId(received(Buffer.from('NATS/1.0 408 Request Timeout\r\nNats-Msg-Id: a\r\n\r\n')))).toBe('a');
    expect(decode).toHaveBeenCalledTimes(3);
    const bare = toJsMsg(
      new MsgImpl({ subject: Buffer.from('s'), sid: 1, hdr: -1, size: 2 }, Buffer.from('{}'), {} as Publisher),
    );
    expect(natsMsgId(bare)).toBe('');
  });
});
