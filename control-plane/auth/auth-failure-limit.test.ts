import { describe, expect, it } from 'vitest';
import { SvcError } from '../../core/errors/index.ts';
import { minuteOf } from './minute-counts.ts';
import { clientOf, createAuthFailureLimit } from './auth-failure-limit.ts';
import { localMinuteCounts } from './shared-minute-counts.ts';

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

  it('refuses on what its counts hold for the minute, those of the other replicas included', () => {
    let now = MIDDLE_OF_A_MINUTE;
    const counts = localMinuteCounts(10);
    const limit = createAuthFailureLimit(3, { now: () => now, counts });
    // As the other replicas' announcements add them.
    counts.add('192.0.2.7', minuteOf(now));
    counts.add('192.0.2.7', minuteOf(now));
    expect(() => limit.check('192.0.2.7')).not.toThrow();
    limit.fail('::ffff:192.0.2.7');
    expect(counts.count('192.0.2.7', minuteOf(now))).toBe(3);
    expect(refusal(() => limit.check('192.0.2.7'))).toMatchObject({ code: 'SVC-SYS-9005' });
    now += 30_000;
    expect(() => limit.check('192.0.2.7')).not.toThrow();
  });

  it('counts a failure under its client, so that an IPv6 one is announced by its /64', () => {
    const counts = localMinuteCounts(10);
    createAuthFailureLimit(3, { now: () => MIDDLE_OF_A_MINUTE, counts }).fail('2001:db8:7:7::1');
    expect(counts.count('2001:db8:7:7::/64', minuteOf(MIDDLE_OF_A_MINUTE))).toBe(1);
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
