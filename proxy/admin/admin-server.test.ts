import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { AdminServer, type Readiness } from './admin-server.ts';
import { createProxyNetMetrics } from './net-metrics.ts';

let admin: AdminServer | undefined;
afterEach(async () => {
  await admin?.close();
  admin = undefined;
});

async function start(readiness: () => Readiness | Promise<Readiness>): Promise<string> {
  const registry = new Registry();
  createProxyNetMetrics(registry).connections.inc({ mode: 'tunnel' }, 3);
  admin = new AdminServer({ registry, readiness, port: 0, host: '127.0.0.1' });
  const { port } = await admin.listen();
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

  it('reports a readiness function that throws as not ready', async () => {
    const base = await start(() => Promise.reject(new Error('store closed')));
    const res = await fetch(`${base}/health/ready`);
    expect(res.status).toBe(503);
    expect(JSON.stringify(await res.json())).toContain('store closed');
  });
});
