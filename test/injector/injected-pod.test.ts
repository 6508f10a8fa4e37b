import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import jsonpatch from 'fast-json-patch';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../harness/free-port.ts';
import { startNatsServer, type NatsServer } from '../harness/nats-server.ts';
import {
  controlPlaneProcess,
  killAllProcesses,
  metricValue,
  removeDirs,
  seedFleetTenant,
  type ControlPlaneProcess,
  type FleetTenant,
} from '../harness/processes.ts';
import { startSimulator, type Simulator } from '../simulator/server.ts';
import {
  buildRenderer,
  manifest,
  RENDERER_SETUP_MS,
  removeRenderer,
  renderChart,
  type Rendered,
} from '../helm/render.ts';
import { podOf, podReview, startInjector, type InjectorProcess } from './injector-process.ts';
import { addSecrets, materialisePod, type ClusterSecrets } from './pod-runtime.ts';

const ROOT = new URL('../..', import.meta.url).pathname;
const NATS_HOST = 'ag-agent-governance-nats.agent-governance.svc.cluster.local:4222';

/** The agent: Node's built-in fetch, nothing but its environment to find the proxy and the CA. */
const AGENT = `
const res = await fetch('https://api.openai.com/v1/chat/completions', {
  method: 'POST',
  headers: { 'content-type': 'application/json', authorization: 'Bearer ' + process.env.OPENAI_API_KEY },
  body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Say hello.' }], max_tokens: 20 }),
});
const body = await res.json();
console.log(JSON.stringify({ status: res.status, envelope: res.headers.get('x-svc-envelope-id'), body }));
`;

/** Runs the agent (async: the simulator answers from this process's event loop). */
function runAgent(env: Record<string, string>): Promise<{ status: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', AGENT], { env, timeout: 20_000 });
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    child.on('close', (status) => resolve({ status, out, err }));
  });
}

let sim: Simulator;
let nats: NatsServer;
let cp: ControlPlaneProcess;
let tenant: FleetTenant;
let injector: InjectorProcess;
let rendered: Rendered;
let proxy: ChildProcess | undefined;
let proxyLog = '';
const dirs: string[] = [];
let ports: { proxy: number; admin: number };

beforeAll(buildRenderer, RENDERER_SETUP_MS);
beforeAll(async () => {
  sim = await startSimulator();
  ports = { proxy: await freePort(), admin: await freePort() };
  rendered = renderChart({
    sidecar: {
      proxyPort: ports.proxy,
      adminPort: ports.admin,
      logLevel: 'warn',
      // What a platform team sets for an egress gateway; here, the provider simulator.
      env: { SVC_UPSTREAM_OVERRIDES: `api.openai.com=${sim.url}` },
    },
    injection: { namespaces: { agents: { tenant: 'acme', apiKeySecret: 'acme-sidecar-key' } } },
  });
  // The embedded server's configuration as the chart renders it, less two lines: the monitoring
  // port (not under test, and fixed, so it would collide on this machine) and the store directory
  // (the volume's mount path; the harness gives a temp directory instead).
  const confDir = mkdtempSync(join(tmpdir(), 'nats-conf-'));
  dirs.push(confDir);
  const config = manifest(rendered, 'Secret', 'ag-agent-governance-nats-config');
  // Its TLS files are the server Secret's, written where the configuration names them.
  const server = manifest(rendered, 'Secret', 'ag-agent-governance-nats-server');
  for (const file of ['tls.crt', 'tls.key', 'ca.crt'])
    writeFileSync(join(confDir, file), Buffer.from(server.data[file], 'base64'));
  const conf = Buffer.from(config.data['nats.conf'], 'base64')
    .toString()
    .replace(/^http: .*$/m, '')
    .replace(/^\s*store_dir: .*$/m, '')
    .replaceAll('/etc/nats/tls/', `${confDir}/`);
  writeFileSync(join(confDir, 'nats.conf'), conf);
  nats = await startNatsServer({ configFile: join(confDir, 'nats.conf') });
  const cpCreds = manifest(rendered, 'Secret', 'ag-agent-governance-nats-control-plane');
  // The server's certificate names the service and localhost (a port-forward), not 127.0.0.1.
  cp = await controlPlaneProcess(`tls://localhost:${nats.port}`, {
    SVC_NATS_USER: Buffer.from(cpCreds.data.user, 'base64').toString(),
    SVC_NATS_PASSWORD: Buffer.from(cpCreds.data.password, 'base64').toString(),
    SVC_NATS_TLS_CA_FILE: join(confDir, 'ca.crt'),
  });
  await cp.start();
  tenant = await seedFleetTenant(cp, 'acme', { max_cost_usd: 10, max_tokens: 10_000_000 });
  injector = await startInjector(rendered);
}, 90_000);

afterAll(async () => {
  if (proxy !== undefined && proxy.exitCode === null) {
    const exited = new Promise((r) => proxy!.once('exit', r));
    proxy.kill('SIGTERM');
    await exited;
  }
  await injector?.stop();
  await killAllProcesses();
  await sim?.close();
  await nats?.dispose();
  await removeDirs([...dirs, cp?.dataDir]);
  removeRenderer();
});

describe('an injected pod', () => {
  it('reaches the provider through its sidecar, governed and metered, with only what the patch gave it', async () => {
    const deployment = {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'research-agent', namespace: 'agents' },
      spec: {
        selector: { matchLabels: { app: 'research-agent' } },
        template: {
          metadata: {
            labels: { app: 'research-agent' },
            annotations: { 'agent-governance.io/budget': tenant.budgetId },
          },
          spec: {
            containers: [
              {
                name: 'agent',
                image: 'node:24-slim',
                command: ['node', 'agent.js'],
                env: [{ name: 'OPENAI_API_KEY', value: 'sk-agent' }],
              },
            ],
          },
        },
      },
    };
    const pod = podOf(deployment);
    const answer = await injector.post(podReview(pod, 'agents'));
    const ops = JSON.parse(Buffer.from(answer.body.response.patch, 'base64').toString());
    const injected = jsonpatch.applyPatch(structuredClone(pod), ops, true, false).newDocument;

    // The cluster: the Secrets the chart rendered, and the one the team made for the sidecar's key.
    const secrets: ClusterSecrets = new Map([['agents/acme-sidecar-key', { 'api-key': tenant.apiKey }]]);
    addSecrets(
      secrets,
      rendered.manifests.map((m) => m.object),
    );
    const runtime = materialisePod(injected, secrets, { [NATS_HOST]: `localhost:${nats.port}` });
    dirs.push(...runtime.dirs);

    const sidecar = injected.spec.initContainers[0];
    expect(sidecar.name).toBe('agent-governance-proxy');
    const sidecarEnv = runtime.env(sidecar);
    expect(sidecarEnv.SVC_NATS_USER).toBe('proxy-acme');
    // Over TLS, trusting the CA the chart generated for the embedded server.
    expect(sidecarEnv.SVC_NATS_URL).toBe(`tls://localhost:${nats.port}`);
    expect(readFileSync(sidecarEnv.SVC_NATS_TLS_CA_FILE!, 'utf8')).toContain('BEGIN CERTIFICATE');
    proxy = spawn(process.execPath, ['proxy/main.ts'], {
      cwd: ROOT,
      env: sidecarEnv,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    proxy.stdout?.on('data', (c: Buffer) => (proxyLog += c.toString()));
    proxy.stderr?.on('data', (c: Buffer) => (proxyLog += c.toString()));
    // The kubelet's startup probe, as the patch declares it.
    const probe = sidecar.startupProbe.httpGet;
    const port = sidecar.ports.find((p: any) => p.name === probe.port).containerPort;
    const deadline = Date.now() + 30_000;
    for (;;) {
      if (proxy.exitCode !== null) throw new Error(`sidecar exited:\n${proxyLog}`);
      const status = await fetch(`http://127.0.0.1:${port}${probe.path}`).then(
        (r) => r.status,
        () => 0,
      );
      if (status === 200) break;
      if (Date.now() > deadline) throw new Error(`sidecar never passed its startup probe:\n${proxyLog}`);
      await new Promise((r) => setTimeout(r, 100));
    }

    // The bundle the app mounts was written by the sidecar: public roots plus the namespace's CA.
    const appEnv = runtime.env(injected.spec.containers[0]);
    const bundle = readFileSync(appEnv.SSL_CERT_FILE!, 'utf8');
    const ca = Buffer.from(
      manifest(rendered, 'Secret', 'ag-agent-governance-proxy-ca', 'agents').data['tls.crt'],
      'base64',
    ).toString();
    expect(bundle).toContain(ca.trim());
    expect(bundle.match(/BEGIN CERTIFICATE/g)!.length).toBeGreaterThan(100);
    expect(existsSync(appEnv.NODE_EXTRA_CA_CERTS!)).toBe(true);
    expect(Object.keys(appEnv).some((k) => k.startsWith('SVC_'))).toBe(false);

    const run = await runAgent(appEnv);
    expect(run.status, `${run.err}\n${proxyLog}`).toBe(0);
    const result = JSON.parse(run.out.trim());
    expect(result.status).toBe(200);
    expect(result.envelope).toMatch(/^[0-9a-f-]{36}$/);
    expect(result.body.choices[0].message.content.length).toBeGreaterThan(0);
    expect(sim.requests).toHaveLength(1);
    expect(sim.requests[0]!.path).toBe('/v1/chat/completions');
    // No governance metadata crossed to the provider.
    expect(Object.keys(sim.requests[0]!.headers).filter((h) => h.startsWith('x-svc-'))).toEqual([]);

    // Metered on the pod (read with the sidecars' metrics token, as the PodMonitor scrapes), and
    // applied to the budget by the control plane over NATS.
    const token = Buffer.from(
      manifest(rendered, 'Secret', 'ag-agent-governance-sidecar-metrics-token', 'agents').data.token,
      'base64',
    ).toString();
    expect((await fetch(`http://127.0.0.1:${port}/metrics`)).status).toBe(401);
    const metrics = await (
      await fetch(`http://127.0.0.1:${port}/metrics`, { headers: { authorization: `Bearer ${token}` } })
    ).text();
    expect(
      metricValue(metrics, 'svc_proxy_requests_total', 'provider="openai",model="gpt-4o-mini",decision="allowed"'),
    ).toBe(1);
    expect(metricValue(metrics, 'svc_proxy_cost_usd_total', 'provider="openai",model="gpt-4o-mini"')).toBeGreaterThan(
      0,
    );
    expect(metricValue(metrics, 'svc_nats_connected')).toBe(1);
    const labels = `tenant_id="acme",budget_id="${tenant.budgetId}"`;
    let spent = 0;
    for (const until = Date.now() + 15_000; Date.now() < until; await new Promise((r) => setTimeout(r, 200))) {
      spent = metricValue(await cp.scrape(), 'svc_budget_usage_dollars', labels) ?? 0;
      if (spent > 0) break;
    }
    expect(spent).toBeGreaterThan(0);
    const cpMetrics = await cp.scrape();
    expect(metricValue(cpMetrics, 'svc_budget_limit_dollars', labels)).toBe(10);
    expect(metricValue(cpMetrics, 'svc_nats_connected')).toBe(1);
  });

  it('is trusted only through the mounted bundle: without the CA variables the agent refuses the intercepted host', async () => {
    const injectedEnv = {
      HTTPS_PROXY: `http://127.0.0.1:${ports.proxy}`,
      NODE_USE_ENV_PROXY: '1',
      OPENAI_API_KEY: 'sk-agent',
    };
    const run = await runAgent(injectedEnv);
    expect(run.status).not.toBe(0);
    expect(run.err).toMatch(/certificate|fetch failed/i);
  });
});
