import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { ErrorPages } from '../../core/errors/index.ts';
import { AdminServer, type Readiness } from './admin-server.ts';
import { createProxyNetMetrics } from './net-metrics.ts';

let admin: AdminServer | undefined;
const logged: Array<{ fields: object; message: string }> = [];
afterEach(async () => {
  await admin?.close();
  admin = undefined;
  logged.length = 0;
});
const errorPages = ErrorPages.load();

async function start(readiness: () => Readiness | Promise<Readiness>): Promise<string> {
  const registry = new Registry();
  createProxyNetMetrics(registry).connections.inc({ mode: 'tunnel' }, 3);
  let base = '';
  admin = new AdminServer({
    registry,
    readiness,
    errorPages,
    documentationBase: () => base,
    logger: { error: (fields, message) => logged.push({ fields, message }) },
    port: 0,
    host: '127.0.0.1',
  });
  const { port } = await admin.listen();
  base = `http://127.0.0.1:${port}`;
  return `http://127.0.0.1:${port}`;
}

describe('AdminServer', () => {
  it('serves the registry in Prometheus text format and answers liveness', async () => {
    const base = await start(() => ({ ready: true, reasons: [] }));
    const metrics = await fetch(`${base}/metrics`);
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toContain('svc_proxy_connections_total{mode="tunnel"} 3');
    expect((await fetch(`${base}/health/live`)).status).toBe(200);
  });

  it('answers readiness 200 when ready and 503 with the reasons when not', async () => {
    let state: Readiness = { ready: false, reasons: ['ruleset not synced', 'CA not loaded'] };
    const base = await start(() => state);
    const notReady = await fetch(`${base}/health/ready`);
    expect(notReady.status).toBe(503);
    expect(await notReady.json()).toEqual({ status: 'not_ready', reasons: ['ruleset not synced', 'CA not loaded'] });
    state = { ready: true, reasons: [] };
    expect((await fetch(`${base}/health/ready`)).status).toBe(200);
  });

  it('reports a readiness function that throws as not ready, its text in the log only', async () => {
    const base = await start(() => Promise.reject(new Error('store closed at /var/lib/svc/proxy')));
    const res = await fetch(`${base}/health/ready`);
    expect(res.status).toBe(503);
    const body = JSON.stringify(await res.json());
    expect(body).toContain('readiness check failed');
    expect(body).not.toContain('/var/lib/svc');
    expect(JSON.stringify(logged.map((l) => (l.fields as { err: Error }).err.message))).toContain('/var/lib/svc');
  });

  it('serves the page of an error code as text, and an unknown code as a 404 SVC body', async () => {
    const base = await start(() => ({ ready: true, reasons: [] }));
    const page = await fetch(`${base}/docs/errors/SVC-BUD-3001`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    expect(await page.text()).toMatch(/^SVC-BUD-3001: budget exhausted\n\nHTTP 422 /);
    const unknown = await fetch(`${base}/docs/errors/SVC-NOPE-1`);
    expect(unknown.status).toBe(404);
    const body = (await unknown.json()) as { error: { code: string; documentation_url: string } };
    expect(body.error.code).toBe('SVC-SYS-9006');
    expect(body.error.documentation_url).toBe(`${base}/docs/errors/SVC-SYS-9006`);
  });
});
