import fc from 'fast-check';
import { parseInfo } from 'nats/lib/jetstream/jsmsg.js';
import { describe, expect, it } from 'vitest';
import { ackPosition } from './ack-position.ts';

const name = fc.stringMatching(/^[A-Za-z0-9_-]{1,32}$/);
const count = fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER });

describe('ackPosition', () => {
  it('reads what the client reads from either form of reply subject', () => {
    fc.assert(
      fc.property(name, name, count, count, count, fc.boolean(), (stream, consumer, delivered, seq, other, domain) => {
        const tail = `${delivered}.${seq}.${other}.1764561600000000000.${other}`;
        const reply = domain
          ? `$JS.ACK.hub.ACCOUNTHASH.${stream}.${consumer}.${tail}.r4nd0m`
          : `$JS.ACK.${stream}.${consumer}.${tail}`;
        const info = parseInfo(reply);
        expect(ackPosition(reply)).toEqual({ seq: info.streamSequence, deliveryCount: info.deliveryCount });
      }),
    );
  });

  it('reads nothing from a subject that is not a JetStream reply, or whose counts are not numbers', () => {
    for (const reply of [
      '',
      '_INBOX.abc',
      '$JS.ACK.s.c.1.2.3.4',
      '$JS.ACK.s.c.1.2.3.4.5.6',
      '$JS.ACK.s.c.x.2.3.4.5',
      '$JS.ACK.s.c.1..3.4.5',
      '$JS.ACK.s.c.1.-2.3.4.5',
      '$JS.ACK.s.c.0.2.3.4.5',
      '$JS.ACK.d.h.s.c.1.2e3.3.4.5.r',
    ])
      expect(ackPosition(reply), reply).toBeUndefined();
  });
});
