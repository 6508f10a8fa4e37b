import type { LookupAddress } from 'node:dns';
import { isIP } from 'node:net';
import { fetch, ProxyAgent } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Resolve } from '../../proxy/egress/index.ts';
import { metricValue, rawConnect, startEcho, startRig, viaForwardProxy, type Rig } from './harness.ts';

/** Names as a hostile DNS answers them; rebind.test answers from a queue, one entry per lookup. */
const NAMES: Record<string, string[]> = {
  'metadata.test': ['169.254.169.254'],
  'metadata.google.internal': ['169.254.169.254'],
  'imds-v6.test': ['fd00:ec2::254'],
  'mapped.test': ['::ffff:169.254.169.254'],
  'mixed.test': ['127.0.0.1', '169.254.169.254'],
  'intercepted-metadata.test': ['169.254.169.254'],
  'local.test': ['127.0.0.1'],
};
const rebindAnswers: string[] = [];
let rebindLookups = 0;
function addressesOf(hostname: string): LookupAddress[] {
  const answer = (address: string): LookupAddress => ({ address, family: isIP(address) });
  if (hostname === 'rebind.test') {
    rebindLookups += 1;
    return [answer(rebindAnswers.shift() ?? '169.254.169.254')];
  }
  const addresses = NAMES[hostname];
  if (addresses === undefined)
    throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
  return addresses.map(answer);
}
const resolve: Resolve = (hostname) => Promise.resolve().then(() => addressesOf(hostname));

let rig: Rig;
let echo: Awaited<ReturnType<typeof startEcho>>;
beforeAll(async () => {
  echo = await startEcho();
  rig = await startRig({
    resolve,
    interceptHost: (host) => host === 'api.openai.com' || host === 'intercepted-metadata.test',
  });
});
afterAll(async () => {
  await rig.close();
  await echo.close();
});

const refusals = () => metricValue(rig.registry, 'svc_proxy_egress_refusals_total', { reason: 'address' });

describe('egress to link-local and metadata addresses', () => {
  it.each([
    '169.254.169.254:443',
    '169.254.170.2:80',
    '[fd00:ec2::254]:443',
    '[::ffff:169.254.169.254]:443',
    '[64:ff9b::a9fe:a9fe]:443',
    '[fe80::1]:443',
  ])('refuses a blind CONNECT to %s with 403 SVC-ADP-5003, counted', async (authority) => {
    const before = await refusals();
    const answer = await rawConnect(rig.proxyPort, authority);
    expect(answer).toMatch(/^HTTP\/1\.1 403 /);
    expect(answer).toContain('"code":"SVC-ADP-5003"');
    expect(await refusals()).toBe(before + 1);
  });

  it('refuses 0.0.0.0, which on Linux reaches the local host, even where a server listens', async () => {
    const answer = await rawConnect(rig.proxyPort, `0.0.0.0:${echo.port}`, 'hello');
    expect(answer).toMatch(/^HTTP\/1\.1 403 /);
    expect(answer).toContain('SVC-ADP-5003');
    expect(answer).not.toContain('echo:');
  });

  it.each(['metadata.test', 'metadata.google.internal', 'imds-v6.test', 'mapped.test'])(
    'refuses a blind CONNECT to %s, a name resolving to a metadata address, on the resolved address',
    async (name) => {
      const answer = await rawConnect(rig.proxyPort, `${name}:443`);
      expect(answer).toMatch(/^HTTP\/1\.1 403 /);
      expect(answer).toContain('SVC-ADP-5003');
      expect(answer).toContain(name);
    },
  );

  it('refuses a name with any refused address, even when another would be allowed', async () => {
    const answer = await rawConnect(rig.proxyPort, `mixed.test:${echo.port}`, 'hello');
    expect(answer).toMatch(/^HTTP\/1\.1 403 /);
    expect(answer).not.toContain('echo:');
  });

  it('refuses a forward request to a metadata address or a name resolving there', async () => {
    for (const target of [
      'http://169.254.169.254/latest/meta-data/',
      'http://metadata.google.internal/computeMetadata/v1/',
    ]) {
      const res = await viaForwardProxy(rig.proxyPort, target, { 'metadata-flavor': 'Google' });
      expect(res.status).toBe(403);
      expect((JSON.parse(res.body) as { error: { code: string } }).error.code).toBe('SVC-ADP-5003');
    }
  });

  it('refuses an intercepted request whose host resolves to a metadata address', async () => {
    const agent = new ProxyAgent({ uri: rig.proxyUrl, requestTls: { ca: rig.proxyCaPem } });
    try {
      const res = await fetch('https://intercepted-metadata.test/latest/api/token', {
        method: 'PUT',
        dispatcher: agent,
      });
      expect(res.status).toBe(403);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('SVC-ADP-5003');
    } finally {
      await agent.close();
    }
  });

  it('resolves once and dials the address it checked: a name that rebinds to metadata after the check never gets there', async () => {
    rebindLookups = 0;
    // First answer a harmless address, then the metadata address to any second lookup.
    rebindAnswers.push('127.0.0.1', '169.254.169.254');
    const first = await rawConnect(rig.proxyPort, `rebind.test:${echo.port}`, 'hello');
    expect(first).toMatch(/^HTTP\/1\.1 200 /);
    expect(first).toContain('echo:hello');
    expect(rebindLookups).toBe(1);
    // The next connection looks up again and is refused on what it got.
    const second = await rawConnect(rig.proxyPort, `rebind.test:${echo.port}`, 'hello');
    expect(second).toMatch(/^HTTP\/1\.1 403 /);
    expect(rebindLookups).toBe(2);
  });

  it('still tunnels to an allowed name and address', async () => {
    const answer = await rawConnect(rig.proxyPort, `local.test:${echo.port}`, 'hello');
    expect(answer).toContain('echo:hello');
  });
});

describe('egress to private ranges', () => {
  it('refuses private and loopback addresses when they are denied, except the allowed CIDRs, and honours extra denied CIDRs', async () => {
    const denied = await startRig({ resolve, addressPolicy: { private: 'deny' } });
    const excepted = await startRig({ resolve, addressPolicy: { private: 'deny', allowCidrs: ['127.0.0.0/8'] } });
    const extra = await startRig({ resolve, addressPolicy: { denyCidrs: ['127.0.0.1/32'] } });
    try {
      for (const authority of [`127.0.0.1:${echo.port}`, `local.test:${echo.port}`, '10.1.2.3:443', '[fd12::1]:443']) {
        expect(await rawConnect(denied.proxyPort, authority, 'hello')).toMatch(/^HTTP\/1\.1 403 .*[\s\S]*SVC-ADP-5003/);
      }
      // Reverse mode dials through the same guard: its loopback upstream is refused too.
      const reverse = await fetch(`${denied.proxyUrl}/plain/x`);
      expect(reverse.status).toBe(403);
      expect(await rawConnect(excepted.proxyPort, `local.test:${echo.port}`, 'hello')).toContain('echo:hello');
      expect(await rawConnect(extra.proxyPort, `127.0.0.1:${echo.port}`, 'hello')).toMatch(/^HTTP\/1\.1 403 /);
    } finally {
      await Promise.all([denied.close(), excepted.close(), extra.close()]);
    }
  });
});
