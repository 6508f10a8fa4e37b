import type { LookupAddress } from 'node:dns';
import { isIP } from 'node:net';
import { describe, expect, it } from 'vitest';
import { isSvcError } from '../../core/errors/index.ts';
import { AddressPolicy } from './address-policy.ts';
import { EgressGuard } from './egress-guard.ts';

const answers: Record<string, string[]> = {
  'dual.test': ['2001:db8::1', '192.0.2.1'],
  'metadata.test': ['169.254.169.254'],
  'late-metadata.test': ['192.0.2.1', 'fd00:ec2::254'],
};

function guard(onRefused: () => void = () => undefined) {
  const lookups: string[] = [];
  const g = new EgressGuard({
    policy: new AddressPolicy(),
    onRefused,
    resolve: (hostname) => {
      lookups.push(hostname);
      return Promise.resolve(
        (answers[hostname] ?? []).map((address): LookupAddress => ({ address, family: isIP(address) })),
      );
    },
  });
  return { g, lookups };
}

function lookup(g: EgressGuard, hostname: string, options: { all?: boolean; family?: number }) {
  return new Promise<{ error: unknown; address: unknown; family: unknown }>((resolve) => {
    g.lookup(hostname, options, (error, address, family) => resolve({ error, address, family }));
  });
}

describe('EgressGuard', () => {
  it('hands back exactly the resolved addresses, filtered by the family asked for', async () => {
    const { g, lookups } = guard();
    expect((await lookup(g, 'dual.test', { all: true })).address).toEqual([
      { address: '2001:db8::1', family: 6 },
      { address: '192.0.2.1', family: 4 },
    ]);
    expect(await lookup(g, 'dual.test', { family: 4 })).toEqual({ error: null, address: '192.0.2.1', family: 4 });
    expect(lookups).toEqual(['dual.test', 'dual.test']);
  });

  it('refuses a name when any of its addresses is refused, with SVC-ADP-5003 naming both, and counts it', async () => {
    let refused = 0;
    const { g } = guard(() => (refused += 1));
    for (const name of ['metadata.test', 'late-metadata.test']) {
      const { error } = await lookup(g, name, { all: true });
      expect(isSvcError(error) && error.code).toBe('SVC-ADP-5003');
      expect((error as Error).message).toContain(name);
    }
    expect(refused).toBe(2);
  });

  it('checks IP literals without resolving them, brackets or not', () => {
    const { g, lookups } = guard();
    expect(g.checkLiteral('[fd00:ec2::254]')?.code).toBe('SVC-ADP-5003');
    expect(g.checkLiteral('169.254.169.254')?.code).toBe('SVC-ADP-5003');
    expect(g.checkLiteral('192.0.2.1')).toBeUndefined();
    expect(g.checkLiteral('metadata.test')).toBeUndefined();
    expect(lookups).toEqual([]);
  });

  it('answers ENOTFOUND for a name without addresses', async () => {
    const { g } = guard();
    expect((await lookup(g, 'nowhere.test', {})).error).toMatchObject({ code: 'ENOTFOUND' });
  });
});
