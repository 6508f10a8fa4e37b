import type { LookupAddress } from 'node:dns';
import type { LookupFunction } from 'node:net';
import { describe, expect, it } from 'vitest';
import { WebhookTargets } from './webhook-targets.ts';

const strict = new WebhookTargets({ allowHttp: false, allowedHosts: '' });

describe('webhook URLs a caller may store', () => {
  it.each([
    ['http://hooks.example.com/x', 'must be an https URL'],
    ['ftp://hooks.example.com/x', 'must be an https URL'],
    ['https://127.0.0.1/x', 'private'],
    ['https://2130706433/x', 'private'],
    ['https://0x7f.1/x', 'private'],
    ['https://10.1.2.3/x', 'private'],
    ['https://172.20.0.1/x', 'private'],
    ['https://192.168.1.1/x', 'private'],
    ['https://169.254.169.254/latest/meta-data', 'link-local'],
    ['https://[fd00:ec2::254]/x', 'private'],
    ['https://[::1]/x', 'loopback'],
    ['https://[::ffff:127.0.0.1]/x', 'private'],
    ['https://[::ffff:a9fe:a9fe]/x', 'private'],
    ['https://[fe80::1]/x', 'link-local'],
    // IPv4-compatible and IPv4-translated forms of 127.0.0.1.
    ['https://[::7f00:1]/x', 'private'],
    ['https://[::ffff:0:7f00:1]/x', 'private'],
    ['https://0.0.0.0/x', 'private'],
    ['https://localhost/x', 'local'],
    ['https://printer.local/x', 'local'],
  ])('refuses %s', (url, reason) => {
    expect(strict.problemWith(url)).toContain(reason);
  });

  it.each(['https://hooks.example.com/budget?team=a', 'https://93.184.216.34/x', 'https://[2606:4700::1111]/x'])(
    'accepts %s',
    (url) => expect(strict.problemWith(url)).toBeNull(),
  );

  it('accepts plain HTTP and allow-listed private targets only when configured', () => {
    const open = new WebhookTargets({ allowHttp: true, allowedHosts: '10.20.0.0/16, hooks.internal, *.corp.example' });
    expect(open.problemWith('http://hooks.example.com/x')).toBeNull();
    expect(open.problemWith('https://10.20.3.4/x')).toBeNull();
    expect(open.problemWith('https://10.21.3.4/x')).not.toBeNull();
    expect(open.addressAllowed('hooks.internal', '10.99.0.1')).toBe(true);
    expect(open.addressAllowed('a.corp.example', '192.168.0.9')).toBe(true);
    expect(open.addressAllowed('corp.example.evil.test', '192.168.0.9')).toBe(false);
  });

  it('refuses a malformed allow-list at start, naming the setting', () => {
    expect(() => new WebhookTargets({ allowHttp: false, allowedHosts: '10.0.0.0/40' })).toThrow(
      /SVC_WEBHOOK_ALLOWED_HOSTS/,
    );
  });
});

describe('the lookup of a delivery', () => {
  const resolving =
    (addresses: string[]): LookupFunction =>
    (_host, _options, callback) =>
      (callback as unknown as (e: null, a: LookupAddress[]) => void)(
        null,
        addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 })),
      );
  const lookup = (targets: WebhookTargets, all: boolean) =>
    new Promise<unknown>((resolve, reject) =>
      targets.lookup('hooks.example.com', { all }, (error, address) => (error ? reject(error) : resolve(address))),
    );

  it('refuses a name when any address it resolves to is denied (public and private mixed)', async () => {
    const targets = new WebhookTargets({
      allowHttp: false,
      allowedHosts: '',
      resolve: resolving(['93.184.216.34', '10.0.0.5']),
    });
    await expect(lookup(targets, false)).rejects.toThrow(/denied address/);
  });

  it('refuses an IPv4-mapped metadata address', async () => {
    const targets = new WebhookTargets({
      allowHttp: false,
      allowedHosts: '',
      resolve: resolving(['::ffff:169.254.169.254']),
    });
    await expect(lookup(targets, true)).rejects.toThrow(/denied address/);
  });

  it('hands over only checked addresses, in the form the caller asked for', async () => {
    const targets = new WebhookTargets({ allowHttp: false, allowedHosts: '', resolve: resolving(['93.184.216.34']) });
    expect(await lookup(targets, false)).toBe('93.184.216.34');
    expect(await lookup(targets, true)).toEqual([{ address: '93.184.216.34', family: 4 }]);
  });
});
