import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_CATALOGUE, documentationUrl, type SvcCode } from '../../core/errors/index.ts';
import { startProxyRig, type ProxyRig } from '../proxy/harness.ts';

const CODES = Object.keys(ERROR_CATALOGUE) as SvcCode[];

let rig: ProxyRig;
beforeAll(async () => {
  rig = await startProxyRig();
});
afterAll(async () => rig.close());

/** The base of the `documentation_url` a process put in a real error body of its own. */
function baseOf(url: string, code: SvcCode): string {
  expect(url.endsWith(`/docs/errors/${code}`), url).toBe(true);
  return url.slice(0, -`/docs/errors/${code}`.length);
}

async function followEveryCode(base: string): Promise<void> {
  for (const code of CODES) {
    const res = await fetch(documentationUrl(base, code));
    expect(res.status, code).toBe(200);
    const text = await res.text();
    expect(text.startsWith(`${code}: ${ERROR_CATALOGUE[code].title}\n`), code).toBe(true);
    expect(text).toContain(`HTTP ${ERROR_CATALOGUE[code].http} `);
  }
  const unknown = await fetch(`${base}/docs/errors/SVC-XYZ-0000`);
  expect(unknown.status).toBe(404);
  expect(((await unknown.json()) as { error: { code: string } }).error.code).toBe('SVC-SYS-9006');
}

describe('every documentation_url resolves', () => {
  it('on the control plane, without credentials', async () => {
    const refused = await rig.cp.call('GET', '/v1/no-such-route', { key: null });
    expect(refused.status).toBe(404);
    const base = baseOf(refused.body.error.documentation_url, 'SVC-SYS-9006');
    expect(base).toBe(rig.cp.url);
    await followEveryCode(base);
  });

  it("on the proxy's admin port, where the proxy's own refusals point", async () => {
    const refused = await fetch(`${rig.addresses.proxyUrl}/no-such-route`);
    expect(refused.status).toBe(404);
    const body = (await refused.json()) as { error: { documentation_url: string } };
    const base = baseOf(body.error.documentation_url, 'SVC-SYS-9006');
    expect(base).toBe(`http://127.0.0.1:${rig.addresses.adminPort}`);
    await followEveryCode(base);
  });
});
