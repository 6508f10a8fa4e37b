import { describe, expect, it } from 'vitest';
import { SvcError } from '../../core/errors/index.ts';
import { minuteOf } from './minute-counts.ts';
import { clientOf, createAuthFailureLimit } from './request-rate.ts';

describe('failed authentications per client', () => {
  it('counts an IPv6 address by its /64 and an IPv4 one however it is written', () => {
    expect(clientOf('2001:db8:1:2:aaaa::1')).toBe(clientOf('2001:0db8:0001:0002:ffff:ffff:ffff:ffff'));
    expect(clientOf('2001:db8:1:2::1')).not.toBe(clientOf('2001:db8:1:3::1'));
    expect(clientOf('::ffff:192.0.2.7')).toBe('192.0.2.7');
    expect(clientOf('192.0.2.7')).not.toBe(clientOf('192.0.2.8'));
    expect(clientOf('not an address')).toBe('not an address');
  });

  it('refuses every address of a /64 once its addresses together reach the limit', () => {
    const limit = createAuthFailureLimit(3, { now: () => MIDDLE_OF_A_MINUTE });
    for (const host of ['1', '2', '3']) limit.fail(`2001:db8:7:7::${host}`);
    expect(refusal(() => limit.check('2001:db8:7:7::ffff'))).toMatchObject({
      code: 'SVC-SYS-9005',
      details: { retry_after_seconds: 30 },
    });
    expect(() => limit.check('2001:db8:7:8::1')).not.toThrow();
  });

  it('counts the failures another replica announced for the minute, and none of a minute that passed', () => {
    let now = MIDDLE_OF_A_MINUTE;
    const limit = createAuthFailureLimit(3, { now: () => now });
    const minute = minuteOf(now);
    limit.addAnnounced('192.0.2.7', minute - 1, 10);
    expect(() => limit.check('192.0.2.7')).not.toThrow();
    limit.addAnnounced('192.0.2.7', minute, 2);
    expect(() => limit.check('192.0.2.7')).not.toThrow();
    limit.fail('::ffff:192.0.2.7');
    expect(refusal(() => limit.check('192.0.2.7'))).toMatchObject({ code: 'SVC-SYS-9005' });
    now += 30_000;
    expect(() => limit.check('192.0.2.7')).not.toThrow();
  });

  it('tells of each failure it counted, with the client and the minute', () => {
    const told: Array<[string, number]> = [];
    const limit = createAuthFailureLimit(3, {
      now: () => MIDDLE_OF_A_MINUTE,
      onFailure: (client, minute) => told.push([client, minute]),
    });
    limit.fail('2001:db8:7:7::1');
    expect(told).toEqual([['2001:db8:7:7::/64', minuteOf(MIDDLE_OF_A_MINUTE)]]);
  });
});

/** 30 s into a wall-clock minute. */
const MIDDLE_OF_A_MINUTE = Date.parse('2026-01-01T10:00:30Z');

function refusal(run: () => void): SvcError | undefined {
  try {
    run();
  } catch (error) {
    if (error instanceof SvcError) return error;
    throw error;
  }
  return undefined;
}
