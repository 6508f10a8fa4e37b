import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ProxyAgent } from 'undici';
import { loadOrCreateCa } from '../../proxy/tls/index.ts';
import { freePort } from './free-port.ts';
import { controlPlaneDatabase, dropControlPlaneDatabases } from './postgres.ts';

const ROOT_DIR = new URL('../..', import.meta.url).pathname;
export const FLEET_ROOT_KEY = 'fleet-root-administrator-key-0001';

/** Every child any suite started, so a suite (or a dying test run) can always kill them all. */
const children = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

/** One service process (`node control-plane/main.ts`, `node proxy/main.ts`) with its SVC_* env. */
export interface ServiceProcess {
  readonly name: string;
  readonly env: Record<string, string>;
  readonly running: boolean;
  /** How the last run ended: its exit code, or the signal that ended it; null while none ended. */
  readonly exit: { code: number | null; signal: NodeJS.Signals | null } | null;
  /** stdout and stderr so far (across restarts), for failure messages. */
  output(): string;
  /** Spawns the process and waits until `readyUrl` answers 200. */
  start(): Promise<void>;
  /** SIGTERM (graceful shutdown) and wait for the exit. */
  stop(): Promise<void>;
  /** SIGKILL (a crash) and wait for the exit. */
  kill(): Promise<void>;
  restart(): Promise<void>;
}

interface ServiceSpec {
  name: string;
  script: string;
  env: Record<string, string>;
  /** Answers 200 once the process is ready. */
  readyUrl: string;
  startTimeoutMs?: number;
}

function service(spec: ServiceSpec): ServiceProcess {
  let child: ChildProcess | undefined;
  let log = '';
  let exit: ServiceProcess['exit'] = null;
  const end = async (signal: NodeJS.Signals): Promise<void> => {
    const running = child;
    child = undefined;
    if (running === undefined) return;
    const done = exited(running);
    running.kill(signal);
    await done;
    children.delete(running);
  };
  const proc: ServiceProcess = {
    name: spec.name,
    env: spec.env,
    get running() {
      return child !== undefined && child.exitCode === null;
    },
    get exit() {
      return exit;
    },
    output: () => log,
    async start() {
      if (child !== undefined) throw new Error(`${spec.name} is already running`);
      const started = spawn(process.execPath, [spec.script], {
        cwd: ROOT_DIR,
        env: { ...process.env, ...spec.env },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      child = started;
      exit = null;
      children.add(started);
      started.once('exit', (code, signal) => (exit = { code, signal }));
      started.stdout?.on('data', (c: Buffer) => (log += c.toString()));
      started.stderr?.on('data', (c: Buffer) => (log += c.toString()));
      const deadline = Date.now() + (spec.startTimeoutMs ?? 20_000);
      for (;;) {
        if (started.exitCode !== null) {
          children.delete(started);
          child = undefined;
          throw new Error(`${spec.name} exited (${started.exitCode}) before it was ready:\n${log}`);
        }
        const status = await fetch(spec.readyUrl).then(
          (r) => r.status,
          () => 0,
        );
        if (status === 200) return;
        if (Date.now() > deadline) {
          await end('SIGKILL');
          throw new Error(`${spec.name} not ready within the start timeout (last status ${status}):\n${log}`);
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    stop: () => end('SIGTERM'),
    kill: () => end('SIGKILL'),
    async restart() {
      await end('SIGTERM');
      await proc.start();
    },
  };
  return proc;
}

/** pino's level of a warning. */
const WARN = 40;

/**
 * The lines of a process's output at warning level or above, and those that are not a log
 * record (a crash's stack), the last `limit` of them.
 */
export function warnings(output: string, limit = 200): string {
  const lines = output.split('\n').filter((line) => {
    if (line.trim() === '') return false;
    try {
      return ((JSON.parse(line) as { level?: unknown }).level as number) >= WARN;
    } catch {
      return true;
    }
  });
  return lines.slice(-limit).join('\n');
}

/**
 * Kills every child started through this harness (afterAll of every fleet suite), then drops the
 * PostgreSQL databases their control planes ran on.
 */
export async function killAllProcesses(): Promise<void> {
  await Promise.all(
    [...children].map(async (child) => {
      const done = exited(child);
      child.kill('SIGKILL');
      await done;
      children.delete(child);
    }),
  );
  await dropControlPlaneDatabases();
}

export interface RestAnswer {
  status: number;
  body: any;
}

export interface ControlPlaneProcess extends ServiceProcess {
  readonly url: string;
  readonly dataDir: string;
  /** A REST call as the root administrator, acting for `tenant` when given. */
  rest(method: string, path: string, options?: { tenant?: string; body?: unknown }): Promise<RestAnswer>;
  /** `/metrics` scraped with the metrics token: the per-tenant series included. */
  scrape(): Promise<string>;
}

const METRICS_TOKEN = 'fleet-metrics-token-0123456789abcdef';

/**
 * `node control-plane/main.ts` on NATS with its own storage (an LMDB directory, or a PostgreSQL
 * database under SVC_TEST_STORAGE=postgres, dropped by `killAllProcesses`) and a free port.
 */
export async function controlPlaneProcess(
  natsUrl: string,
  env: Record<string, string> = {},
  options: { startTimeoutMs?: number } = {},
): Promise<ControlPlaneProcess> {
  const database = env.SVC_DATABASE_URL === undefined ? await controlPlaneDatabase() : null;
  const dataDir = mkdtempSync(join(tmpdir(), 'fleet-cp-'));
  writeFileSync(join(dataDir, 'metrics-token'), METRICS_TOKEN);
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const proc = service({
    name: 'control-plane',
    script: 'control-plane/main.ts',
    readyUrl: `${url}/health/ready`,
    ...(options.startTimeoutMs !== undefined ? { startTimeoutMs: options.startTimeoutMs } : {}),
    env: {
      ...database?.env,
      SVC_NATS_URL: natsUrl,
      SVC_DATA_DIR: dataDir,
      SVC_HTTP_HOST: '127.0.0.1',
      SVC_HTTP_PORT: String(port),
      SVC_GRPC_PORT: String(await freePort()),
      SVC_BOOTSTRAP_ADMIN_KEY: FLEET_ROOT_KEY,
      SVC_METRICS_TOKEN_FILE: join(dataDir, 'metrics-token'),
      SVC_LOG_LEVEL: 'warn',
      // Suites poll as the root key every 20 ms, 3,000 a minute: over the default 600, every
      // poll after the window's 600th would read a 429 body until the deadline.
      SVC_RATE_LIMIT_PER_MINUTE: '1000000',
      ...env,
    },
  });
  return Object.assign(proc, {
    url,
    dataDir,
    async rest(method: string, path: string, options: { tenant?: string; body?: unknown } = {}): Promise<RestAnswer> {
      const headers: Record<string, string> = { 'x-api-key': FLEET_ROOT_KEY };
      if (options.tenant !== undefined) headers['x-tenant-id'] = options.tenant;
      if (options.body !== undefined) headers['content-type'] = 'application/json';
      const res = await fetch(url + path, {
        method,
        headers,
        ...(options.body !== undefined ? { body: JSON.stringify(options.body) } : {}),
      });
      const text = await res.text();
      let body: unknown = text;
      try {
        body = JSON.parse(text);
      } catch {
        // not JSON (metrics text)
      }
      return { status: res.status, body };
    },
    async scrape(): Promise<string> {
      const res = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
      if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
      return res.text();
    },
  });
}

/** What a proxy process is bound to: made over REST before the proxy starts. */
export interface FleetTenant {
  tenantId: string;
  apiKey: string;
  budgetId: string;
}

/** Creates the tenant, an API key and a budget (limits as given) over REST with the root key. */
export async function seedFleetTenant(
  cp: ControlPlaneProcess,
  tenantId: string,
  limits: Record<string, number>,
): Promise<FleetTenant> {
  const must = async (method: string, path: string, body: unknown, tenant: string | null = tenantId): Promise<any> => {
    const res = await cp.rest(method, path, { ...(tenant !== null ? { tenant } : {}), body });
    if (res.status !== 201) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  };
  await must('POST', '/v1/tenants', { tenant_id: tenantId, name: tenantId }, null);
  const key = await must('POST', '/v1/api-keys', { name: `${tenantId}-sidecar`, scopes: ['admin'] });
  const budget = await must('POST', '/v1/budgets', { name: `${tenantId}-fleet`, type: 'hybrid', limits });
  return { tenantId, apiKey: String(key.key_secret), budgetId: String(budget.budget_id) };
}

export interface ProxyCa {
  certFile: string;
  keyFile: string;
  certPem: string;
}

/** A proxy CA shared by the proxies of a suite (a deployment mounts one from a secret). */
export async function proxyCa(dir: string): Promise<ProxyCa> {
  const ca = await loadOrCreateCa({
    certFile: join(dir, 'ca.pem'),
    keyFile: join(dir, 'ca-key.pem'),
    allowGenerate: true,
  });
  return { certFile: ca.certFile, keyFile: join(dir, 'ca-key.pem'), certPem: ca.certPem };
}

export interface ProxyProcess extends ServiceProcess {
  readonly proxyUrl: string;
  readonly adminUrl: string;
  readonly dataDir: string;
  /** An undici ProxyAgent trusting the proxy CA: HTTPS_PROXY as an undici-based SDK sees it. */
  agent(): ProxyAgent;
  /** The admin port's Prometheus text. */
  metrics(): Promise<string>;
}

export interface ProxyProcessOptions {
  natsUrl: string;
  tenant: FleetTenant;
  ca: ProxyCa;
  /** Where api.openai.com goes (the simulator). */
  openAiUpstream: string;
  env?: Record<string, string>;
}

/** `node proxy/main.ts` (`npm run proxy`) bound to one tenant and budget, on free ports. */
export async function proxyProcess(options: ProxyProcessOptions): Promise<ProxyProcess> {
  const dataDir = mkdtempSync(join(tmpdir(), 'fleet-proxy-'));
  const proxyPort = await freePort();
  const adminPort = await freePort();
  const adminUrl = `http://127.0.0.1:${adminPort}`;
  const proc = service({
    name: `proxy-${options.tenant.tenantId}`,
    script: 'proxy/main.ts',
    readyUrl: `${adminUrl}/health/ready`,
    env: {
      SVC_NATS_URL: options.natsUrl,
      SVC_TENANT_ID: options.tenant.tenantId,
      SVC_API_KEY: options.tenant.apiKey,
      SVC_BUDGET_ID: options.tenant.budgetId,
      SVC_CA_CERT_FILE: options.ca.certFile,
      SVC_CA_KEY_FILE: options.ca.keyFile,
      SVC_DATA_DIR: dataDir,
      SVC_PROXY_HOST: '127.0.0.1',
      SVC_PROXY_PORT: String(proxyPort),
      SVC_PROXY_ADMIN_PORT: String(adminPort),
      SVC_UPSTREAM_OVERRIDES: `api.openai.com=${options.openAiUpstream}`,
      SVC_LOG_LEVEL: 'warn',
      ...options.env,
    },
  });
  return Object.assign(proc, {
    proxyUrl: `http://127.0.0.1:${proxyPort}`,
    adminUrl,
    dataDir,
    agent: () => new ProxyAgent({ uri: `http://127.0.0.1:${proxyPort}`, requestTls: { ca: options.ca.certPem } }),
    metrics: async () => (await fetch(`${adminUrl}/metrics`)).text(),
  });
}

/** Removes data directories once their processes are gone. */
export async function removeDirs(dirs: (string | undefined)[]): Promise<void> {
  await Promise.all(dirs.filter((d) => d !== undefined).map((d) => rm(d, { recursive: true, force: true })));
}

/** The value of a metric line (`name{labels} value`) in Prometheus text, or undefined. */
export function metricValue(text: string, name: string, labels = ''): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(labels === '' ? `${name} ` : `${name}{${labels}}`));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}
