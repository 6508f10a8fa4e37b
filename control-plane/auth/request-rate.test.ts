import { describe, expect, it } from 'vitest';
import { SvcError } from '../../core/errors/index.ts';
import { clientOf, createAuthFailureLimit } from './request-rate.ts';

describe('failed authentications per client', () => {
  it('counts an IPv6 address by its /64 and an IPv4 one however it is written', () => {
    expect(clientOf('2001:db8:1:2:aaaa::1')).toBe(clientOf('2001:0db8:0001:0002:ffff:ffff:ffff:ffff'));
    expect(clientOf('2001:db8:1:2::1')).not.toBe(clientOf('2001:db8:1:3::1'));
    expect(clientOf('::ffff:192.0.2.7')).toBe('192.0.2.7');
    expect(clientOf('192.0.2.7')).not.toBe(clientOf('192.0.2.8'));
    expect(clientOf('not an address')).toBe('not an address');
  });

  it('refuses every address of a /64 once its addresses together reach the limit', async () => {
    const limit = createAuthFailureLimit(3);
    for (const host of ['1', '2', '3']) await limit.fail(`2001:db8:7:7::${host}`);
    const refused = await limit.check('2001:db8:7:7::ffff').catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(SvcError);
    expect((refused as SvcError).code).toBe('SVC-SYS-9005');
    await expect(limit.check('2001:db8:7:8::1')).resolves.toBeUndefined();
  });
});
