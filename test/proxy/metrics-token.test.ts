import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProxyRig, type ProxyRig } from './harness.ts';

const TOKEN = 'metrics-token-of-the-release-0123456789';
let rig: ProxyRig;
let admin: string;

beforeAll(async () => {
  const file = join(mkdtempSync(join(tmpdir(), 'metrics-token-')), 'token');
  writeFileSync(file, `${TOKEN}\n`);
  rig = await startProxyRig({ metrics_token_file: file });
  admin = `http://127.0.0.1:${rig.addresses.adminPort}`;
});
afterAll(async () => {
  await rig.close();
});

describe("the proxy's admin port with SVC_METRICS_TOKEN_FILE", () => {
  it('serves /metrics only to a scrape bearing the token; the probes stay open', async () => {
    const bare = await fetch(`${admin}/metrics`);
    expect(bare.status).toBe(401);
    const body = JSON.stringify(await bare.json());
    expect(body).toContain('SVC-SYS-9003');
    expect(body).not.toContain('svc_proxy_');

    const wrong = await fetch(`${admin}/metrics`, { headers: { authorization: 'Bearer not-the-token' } });
    expect(wrong.status).toBe(401);
    expect(JSON.stringify(await wrong.json())).toContain('SVC-SYS-9003');

    const right = await fetch(`${admin}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(right.status).toBe(200);
    expect(await right.text()).toContain('svc_proxy_');

    expect((await fetch(`${admin}/health/live`)).status).toBe(200);
    expect((await fetch(`${admin}/health/ready`)).status).toBe(200);
  });
});
