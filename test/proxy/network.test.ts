import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { fetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeServer, listen, upstreamCredentials, viaForwardProxy } from '../proxy-net/harness.ts';
import { startProxyRig, type ProxyRig } from './harness.ts';

const run = promisify(execFile);
let rig: ProxyRig;
const seen: IncomingHttpHeaders[] = [];
const payload = Buffer.from(Array.from({ length: 64 * 1024 }, (_, i) => i % 251));
const record = (req: { headers: IncomingHttpHeaders }, res: { end(b: Buffer): void }) => {
  seen.push(req.headers);
  res.end(payload);
};
const plain = createServer(record);
let secure: ReturnType<typeof createHttpsServer>;
let plainPort = 0;
let securePort = 0;
let upstreamCaFile = '';

beforeAll(async () => {
  const creds = await upstreamCredentials();
  secure = createHttpsServer({ key: creds.key, cert: creds.cert }, record);
  plainPort = await listen(plain);
  securePort = await listen(secure);
  upstreamCaFile = join(tmpdir(), `upstream-ca-${process.pid}.pem`);
  await writeFile(upstreamCaFile, creds.ca.certPem);
  rig = await startProxyRig();
  // 127.0.0.1 on any port: the local test servers listen on ports no default egress rule opens.
  await rig.addPolicy({
    name: 'local-test-servers',
    rules: [
      {
        action: 'network:connect',
        effect: 'allow',
        conditions: [{ field: 'host', operator: 'eq', value: '127.0.0.1' }],
      },
    ],
    priority: 800,
  });
  await rig.addPolicy({
    name: 'no-egress-to-evil',
    rules: [
      {
        action: 'network:connect',
        effect: 'deny',
        conditions: [{ field: 'host', operator: 'eq', value: 'evil.test' }],
      },
    ],
    priority: 900,
  });
});
afterAll(async () => {
  await rig.close();
  await closeServer(plain);
  await closeServer(secure);
});

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

describe('network behaviour of the governed proxy', () => {
  it('governs a provider host spelt as a fully qualified name, trailing dot and capitals, through CONNECT and in forward mode', async () => {
    const body = JSON.stringify({ model: 'gpt-4o-mini', max_tokens: 4, messages: [{ role: 'user', content: 'hi' }] });
    // Before, neither spelling matched the intercept list or a provider: the CONNECT went blind and
    // the forward request was relayed ungoverned, each with the agent's own key.
    const connected = await fetch('https://API.openai.com./v1/chat/completions', {
      dispatcher: rig.agent,
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer sk', 'x-request-id': 'fqdn-connect' },
      body,
    });
    expect(connected.status).toBe(200);
    await connected.arrayBuffer();
    expect((await rig.usageEvent('fqdn-connect')).model).toBe('gpt-4o-mini');
    const forwarded = await viaForwardProxy(
      Number(new URL(rig.addresses.proxyUrl).port),
      'http://api.openai.com./v1/chat/completions',
      { 'content-type': 'application/json', authorization: 'Bearer sk', 'x-request-id': 'fqdn-forward' },
      body,
    );
    expect(forwarded.status).toBe(200);
    expect((await rig.usageEvent('fqdn-forward')).model).toBe('gpt-4o-mini');
  });

  it('tunnels a host not on the intercept list blind: the upstream certificate and bytes arrive untouched', async () => {
    const { stdout } = await run(
      'curl',
      [
        '-sS',
        '-x',
        rig.addresses.proxyUrl,
        '--cacert',
        upstreamCaFile,
        '-H',
        'X-Svc-Envelope-Id: tunnelled',
        `https://127.0.0.1:${securePort}/bytes`,
      ],
      {
        encoding: 'buffer',
        timeout: 20_000,
      },
    );
    // Verified against the upstream's own CA, so the proxy did not terminate TLS.
    expect(sha(stdout)).toBe(sha(payload));
    expect(await rig.proxy.registry.getSingleMetricAsString('svc_proxy_connections_total')).toMatch(
      /mode="tunnel"} [1-9]/,
    );
  });

  it('never lets an X-Svc-* header reach a forwarded upstream', async () => {
    seen.length = 0;
    const { stdout } = await run(
      'curl',
      [
        '-sS',
        '-x',
        rig.addresses.proxyUrl,
        '-H',
        'X-Svc-Envelope-Id: e',
        '-H',
        'x-svc-budget-id: b',
        '-H',
        'X-SVC-Anything: 1',
        '-H',
        'x-keep: yes',
        `http://127.0.0.1:${plainPort}/`,
      ],
      {
        encoding: 'buffer',
        timeout: 20_000,
      },
    );
    expect(sha(stdout)).toBe(sha(payload));
    expect(seen).toHaveLength(1);
    expect(seen[0]?.['x-keep']).toBe('yes');
    expect(Object.keys(seen[0] ?? {}).filter((h) => h.startsWith('x-svc-'))).toEqual([]);
  });

  it('refuses a CONNECT to a port no rule opens with 403 SVC-ADP-5003, counted as a port refusal', async () => {
    // localhost is not 127.0.0.1 to the policy, so only the default ports (80, 443) are open for it.
    const result = await run(
      'curl',
      [
        '-sS',
        '-o',
        '/dev/null',
        '-w',
        '%{http_connect}',
        '-x',
        rig.addresses.proxyUrl,
        `https://localhost:${securePort}/`,
      ],
      { timeout: 20_000 },
    ).catch((error: { stdout: string }) => error);
    expect(result.stdout).toBe('403');
    expect(await rig.proxy.registry.getSingleMetricAsString('svc_proxy_egress_refusals_total')).toMatch(
      /reason="port"} 1/,
    );
  });

  it('refuses a CONNECT that a network:connect policy denies', async () => {
    const result = await run(
      'curl',
      ['-sS', '-o', '/dev/null', '-w', '%{http_connect}', '-x', rig.addresses.proxyUrl, 'https://evil.test/'],
      { timeout: 20_000 },
    ).catch((error: { stdout: string }) => error);
    expect(result.stdout).toBe('403');
  });
});
