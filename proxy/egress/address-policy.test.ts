import { describe, expect, it } from 'vitest';
import { isSvcError } from '../../core/errors/index.ts';
import { AddressPolicy, embeddedIpv4 } from './address-policy.ts';

describe('embeddedIpv4', () => {
  it.each([
    ['::ffff:169.254.169.254', '169.254.169.254'],
    ['::ffff:a9fe:a9fe', '169.254.169.254'],
    ['::ffff:0:a9fe:a9fe', '169.254.169.254'],
    ['::a9fe:a9fe', '169.254.169.254'],
    ['64:ff9b::a9fe:a9fe', '169.254.169.254'],
    ['64:ff9b::169.254.169.254', '169.254.169.254'],
    ['64:ff9b:1:abcd::a9fe:a9fe', '169.254.169.254'],
    ['64:ff9b:1::169.254.169.254', '169.254.169.254'],
    ['2002:a9fe:a9fe::1', '169.254.169.254'],
    ['2001:db8::1', undefined],
    ['::1', undefined],
    ['::', undefined],
    ['169.254.169.254', undefined],
  ])('reads %s as %s', (address, expected) => {
    expect(embeddedIpv4(address)).toBe(expected);
  });
});

describe('AddressPolicy', () => {
  const defaults = new AddressPolicy();

  it.each([
    '169.254.169.254',
    '169.254.170.2',
    '100.100.100.200',
    '0.0.0.0',
    '0.1.2.3',
    '224.0.0.1',
    '255.255.255.255',
    '::',
    'fe80::1',
    'fd00:ec2::254',
    '::ffff:169.254.169.254',
    '::ffff:0.0.0.0',
    '::ffff:0:169.254.169.254',
    '64:ff9b::a9fe:a9fe',
    '64:ff9b:1:ffff::a9fe:a9fe',
    '2002:a9fe:a9fe::',
  ])('always refuses %s', (address) => {
    expect(defaults.refusal(address)).toMatch(/link-local, metadata or reserved/);
  });

  it.each([
    '10.0.0.1',
    '172.16.5.4',
    '192.168.1.1',
    '100.64.0.1',
    '127.0.0.1',
    '::1',
    'fd12::1',
    '8.8.8.8',
    '2606:4700::1',
  ])('allows %s by default (cluster services and the pod itself)', (address) => {
    expect(defaults.refusal(address)).toBeUndefined();
  });

  it('refuses private and loopback ranges, mapped forms included, when private egress is denied', () => {
    const policy = new AddressPolicy({ private: 'deny' });
    for (const address of ['10.0.0.1', '172.31.255.255', '192.168.0.1', '100.64.1.1', '127.0.0.1', '::1', 'fc00::1'])
      expect(policy.refusal(address)).toBe('private or loopback');
    expect(policy.refusal('::ffff:10.0.0.1')).toBe('private or loopback');
    expect(policy.refusal('64:ff9b::10.0.0.1')).toBe('private or loopback (embeds 10.0.0.1)');
    expect(policy.refusal('172.32.0.1')).toBeUndefined();
    expect(policy.refusal('8.8.8.8')).toBeUndefined();
  });

  it('lets allowed CIDRs through any refusal and refuses extra denied CIDRs', () => {
    const policy = new AddressPolicy({
      private: 'deny',
      allowCidrs: ['10.96.0.0/12', '169.254.20.10'],
      denyCidrs: ['203.0.113.0/24', '2001:db8::/32'],
    });
    expect(policy.refusal('10.96.0.1')).toBeUndefined();
    expect(policy.refusal('10.0.0.1')).toBe('private or loopback');
    expect(policy.refusal('169.254.20.10')).toBeUndefined();
    expect(policy.refusal('169.254.169.254')).toMatch(/metadata/);
    expect(policy.refusal('203.0.113.9')).toBe('denied by configuration');
    expect(policy.refusal('2001:db8::5')).toBe('denied by configuration');
  });

  it('refuses a malformed CIDR with SVC-SYS-9002 naming the config key', () => {
    let caught: unknown;
    try {
      new AddressPolicy({ denyCidrs: ['10.0.0.0/33'] });
    } catch (error) {
      caught = error;
    }
    expect(isSvcError(caught) && caught.code).toBe('SVC-SYS-9002');
    expect((caught as Error).message).toContain('proxy_egress_deny_cidrs');
  });
});
