/**
 * Resident memory of the proxy-only process at idle, as deployed: the compiled build
 * (`npm run build` first) started as the chart starts it, `node <SIDECAR_NODE_FLAGS>
 * dist/proxy/main.js` with `SIDECAR_ENV`, NATS not reachable (it serves from local state),
 * sampled once it is ready and again once it has run its idle collection (`proxy_idle_gc_ms`
 * after the start). The CPU time it used until ready is printed beside the wall time, since the
 * wall time on a shared machine mostly measures the other work.
 * Further arguments are Node flags added to the sidecar's, to try one. It also prints which of
 * the `node` binary's code the idle process holds resident, by kind (./binary-code-pages.ts).
 *
 *   npm run build && node test/bench/idle-rss.ts [node flags...]
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SIDECAR_ENV, SIDECAR_NODE_FLAGS } from '../../proxy/node-flags.ts';
import { loadOrCreateCa } from '../../proxy/tls/index.ts';
import { freePort } from '../harness/free-port.ts';
import { binaryCodePages } from './binary-code-pages.ts';

const main = new URL('../../dist/proxy/main.js', import.meta.url).pathname;
if (!existsSync(main)) throw new Error('no compiled build: run npm run build first');
const dir = mkdtempSync(join(tmpdir(), 'bench-idle-'));
const ca = await loadOrCreateCa({
  certFile: join(dir, 'ca.pem'),
  keyFile: join(dir, 'ca-key.pem'),
  allowGenerate: true,
});
const adminPort = await freePort();
const started = Date.now();
const flags = [...SIDECAR_NODE_FLAGS, ...process.argv.slice(2)];
const child = spawn(process.execPath, [...flags, main], {
  stdio: 'ignore',
  env: {
    ...process.env,
    ...SIDECAR_ENV,
    SVC_NATS_URL: `nats://127.0.0.1:${await freePort()}`,
    SVC_TENANT_ID: 'bench',
    SVC_API_KEY: 'bench-key',
    SVC_BUDGET_ID: 'bench-budget',
    SVC_CA_CERT_FILE: ca.certFile,
    SVC_CA_KEY_FILE: join(dir, 'ca-key.pem'),
    SVC_DATA_DIR: dir,
    SVC_PROXY_PORT: String(await freePort()),
    SVC_PROXY_ADMIN_PORT: String(adminPort),
    SVC_PROXY_POLICY_FAIL_MODE: 'open',
    SVC_LOG_LEVEL: 'warn',
  },
});
/** A line of `/proc/<pid>/status`, in MB. */
const statusMb = (field: string) =>
  Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))?.[1]) / 1024;
const rssMb = () => statusMb('VmRSS');
for (;;) {
  const status = await fetch(`http://127.0.0.1:${adminPort}/health/ready`).then(
    (r) => r.status,
    () => 0,
  );
  if (status === 200) break;
  if (Date.now() - started > 30_000) throw new Error('proxy not ready within 30 s');
  await new Promise((r) => setTimeout(r, 20));
}
const readyMs = Date.now() - started;
// utime and stime, in clock ticks of 10 ms.
const [utime, stime] = readFileSync(`/proc/${child.pid}/stat`, 'utf8')
  .split(') ')[1]!
  .split(' ')
  .slice(11, 13)
  .map(Number);
const cpuMs = (utime! + stime!) * 10;
const atReady = rssMb();
// The proxy runs its idle collection `proxy_idle_gc_ms` (5 s) after the start when no call came.
const collected = async () => {
  const metrics = await fetch(`http://127.0.0.1:${adminPort}/metrics`).then(async (r) => r.text());
  return Number(/^svc_proxy_idle_gc_total (\d+)$/m.exec(metrics)?.[1] ?? 0) > 0;
};
while (!(await collected())) {
  if (Date.now() - started > 60_000) throw new Error('no idle collection within 60 s of the start');
  await new Promise((r) => setTimeout(r, 100));
}
const collectedAfterMs = Date.now() - started - readyMs;
await new Promise((r) => setTimeout(r, 500));
const environment = Object.entries(SIDECAR_ENV).map(([name, value]) => `${name}=${value}`);
console.log(
  `${environment.join(' ')} node ${process.version} ${flags.join(' ')}: dist/proxy/main.js ready in ${readyMs} ms (${cpuMs} ms CPU); RSS ${atReady.toFixed(1)} MB at ready, ${rssMb().toFixed(1)} MB after the idle collection (${(collectedAfterMs / 1000).toFixed(1)} s after ready)`,
);
// The file pages are mostly the `node` binary's, shared with every process that maps the same
// file (the page cache counts them once); the anonymous pages are this process's own.
console.log(
  `  of which anonymous (the process's own) ${statusMb('RssAnon').toFixed(1)} MB, file pages (shared) ${statusMb('RssFile').toFixed(1)} MB`,
);
const code = binaryCodePages(child.pid!);
if (code.length > 0) {
  const total = code.reduce((sum, [, bytes]) => sum + bytes, 0);
  const mb = (bytes: number) => (bytes / 1024 / 1024).toFixed(1);
  console.log(
    `  the node binary's code resident: ${mb(total)} MB, of which ${code.map(([kind, bytes]) => `${kind} ${mb(bytes)}`).join(', ')}`,
  );
}
child.kill('SIGKILL');
rmSync(dir, { recursive: true, force: true });
