import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../harness/free-port.ts';
import { startNatsServer, type NatsServer } from '../harness/nats-server.ts';
import { proxyCa, removeDirs } from '../harness/processes.ts';
import { SIDECAR_NODE_FLAGS } from '../../proxy/node-flags.ts';

const ROOT = new URL('../..', import.meta.url).pathname;
const ROOT_KEY = 'compiled-build-root-administrator-key';

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => (statSync(join(dir, f)).isDirectory() ? files(join(dir, f)) : [join(dir, f)]));
}

const children: ChildProcess[] = [];
const dirs: string[] = [];
let nats: NatsServer;

/** `node dist/...js` with type stripping off, so that any .ts left in the import graph fails to load. */
async function startCompiled(
  script: string,
  env: Record<string, string>,
  readyUrl: string,
  nodeFlags: readonly string[] = [],
): Promise<() => string> {
  let log = '';
  const child = spawn(process.execPath, ['--no-experimental-strip-types', ...nodeFlags, script], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  child.stdout?.on('data', (c: Buffer) => (log += c.toString()));
  child.stderr?.on('data', (c: Buffer) => (log += c.toString()));
  for (const deadline = Date.now() + 20_000; ; await new Promise((r) => setTimeout(r, 100))) {
    if (child.exitCode !== null) throw new Error(`${script} exited (${child.exitCode}):\n${log}`);
    if (
      (await fetch(readyUrl).then(
        (r) => r.status,
        () => 0,
      )) === 200
    )
      return () => log;
    if (Date.now() > deadline) throw new Error(`${script} not ready:\n${log}`);
  }
}

beforeAll(async () => {
  execFileSync('npm', ['run', 'build'], { cwd: ROOT, stdio: 'pipe' });
  nats = await startNatsServer();
}, 120_000);

afterAll(async () => {
  await Promise.all(
    children.map(async (c) => {
      if (c.exitCode !== null) return;
      const exited = new Promise((r) => c.once('exit', r));
      c.kill('SIGTERM');
      await exited;
    }),
  );
  await nats?.dispose();
  await removeDirs(dirs);
});

describe('npm run build', () => {
  it('emits JavaScript only, with relative imports rewritten to .js and the runtime config beside it', () => {
    const emitted = files(join(ROOT, 'dist'));
    expect(emitted.filter((f) => f.endsWith('.ts'))).toEqual([]);
    expect(emitted.some((f) => f.endsWith('.test.js'))).toBe(false);
    for (const entry of [
      'control-plane/main.js',
      'proxy/main.js',
      'standalone/main.js',
      'control-plane/injector/main.js',
    ]) {
      expect(existsSync(join(ROOT, 'dist', entry)), entry).toBe(true);
    }
    expect(existsSync(join(ROOT, 'dist/config/prices.json'))).toBe(true);
    // The PostgreSQL backend reads its migrations beside its compiled module.
    expect(existsSync(join(ROOT, 'dist/control-plane/storage/postgres/migrations/0001_initial.sql'))).toBe(true);
  });

  it("bundles the sidecar's entry into one ASCII file that imports no other file of dist/", () => {
    const sidecar = readFileSync(join(ROOT, 'dist/proxy/main.js'), 'utf8');
    expect(sidecar.match(/(?:from|import)\s*\(?\s*["']\.{1,2}\//g)).toBeNull();
    // V8 holds an ASCII source at one byte per character, any other at two.
    expect([...sidecar].filter((c) => c.charCodeAt(0) > 0x7f)).toEqual([]);
    // Native packages are loaded from node_modules as installed, not copied in.
    expect(sidecar).toMatch(/from\s*["']lmdb["']/);
  });

  it("names the token thread's compiled entry, which counts without type stripping", () => {
    // The bundle finds the thread's entry beside the compiled twin of the module that starts it.
    const sidecar = readFileSync(join(ROOT, 'dist/proxy/main.js'), 'utf8');
    expect(sidecar).toContain('"../core/metering/token-thread.js"');
    const dir = mkdtempSync(join(tmpdir(), 'compiled-thread-'));
    dirs.push(dir);
    const script = join(dir, 'count.mjs');
    writeFileSync(
      script,
      [
        `import { createTokenThread } from '${join(ROOT, 'dist/core/metering/token-thread.js')}';`,
        'const thread = createTokenThread();',
        "console.log(JSON.stringify(await thread.count([{ encoding: 'o200k_base', text: 'hello world' }])));",
        'await thread.close();',
      ].join('\n'),
    );
    const counted = execFileSync(process.execPath, ['--no-experimental-strip-types', script], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    expect(JSON.parse(counted)).toEqual([2]);
  });

  it('starts the control plane and a proxy bound to it from dist/, without type stripping', async () => {
    const cpDir = mkdtempSync(join(tmpdir(), 'compiled-cp-'));
    const proxyDir = mkdtempSync(join(tmpdir(), 'compiled-proxy-'));
    const caDir = mkdtempSync(join(tmpdir(), 'compiled-ca-'));
    dirs.push(cpDir, proxyDir, caDir);
    const httpPort = await freePort();
    const cpUrl = `http://127.0.0.1:${httpPort}`;
    await startCompiled(
      'dist/control-plane/main.js',
      {
        SVC_NATS_URL: nats.url,
        SVC_DATA_DIR: cpDir,
        SVC_HTTP_HOST: '127.0.0.1',
        SVC_HTTP_PORT: String(httpPort),
        SVC_GRPC_PORT: String(await freePort()),
        SVC_BOOTSTRAP_ADMIN_KEY: ROOT_KEY,
        SVC_LOG_LEVEL: 'warn',
      },
      `${cpUrl}/health/ready`,
    );
    const call = async (path: string, body: unknown, tenant?: string) => {
      const res = await fetch(cpUrl + path, {
        method: 'POST',
        headers: {
          'x-api-key': ROOT_KEY,
          'content-type': 'application/json',
          ...(tenant ? { 'x-tenant-id': tenant } : {}),
        },
        body: JSON.stringify(body),
      });
      expect(res.status, path).toBe(201);
      return (await res.json()) as Record<string, unknown>;
    };
    await call('/v1/tenants', { tenant_id: 'compiled', name: 'compiled' });
    const key = await call('/v1/api-keys', { name: 'sidecar', scopes: ['admin'] }, 'compiled');
    const budget = await call('/v1/budgets', { name: 'b', type: 'hybrid', limits: { max_cost_usd: 1 } }, 'compiled');
    const ca = await proxyCa(caDir);
    const adminPort = await freePort();
    await startCompiled(
      'dist/proxy/main.js',
      {
        SVC_NATS_URL: nats.url,
        SVC_TENANT_ID: 'compiled',
        SVC_API_KEY: String(key.key_secret),
        SVC_BUDGET_ID: String(budget.budget_id),
        SVC_CA_CERT_FILE: ca.certFile,
        SVC_CA_KEY_FILE: ca.keyFile,
        SVC_DATA_DIR: proxyDir,
        SVC_PROXY_HOST: '127.0.0.1',
        SVC_PROXY_PORT: String(await freePort()),
        SVC_PROXY_ADMIN_PORT: String(adminPort),
        SVC_LOG_LEVEL: 'warn',
      },
      `http://127.0.0.1:${adminPort}/health/ready`,
      SIDECAR_NODE_FLAGS,
    );
    const version = (await (await fetch(`${cpUrl}/version`)).json()) as any;
    expect(version.service).toBe('control-plane');
    const metrics = await (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text();
    expect(metrics).toContain('svc_proxy_lease_requests_total{outcome="granted"} 1');
    // The bundle reads docs/errors.md where the compiled tree keeps it.
    const page = await fetch(`http://127.0.0.1:${adminPort}/docs/errors/SVC-BUD-3001`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('SVC-BUD-3001');
  });
});
