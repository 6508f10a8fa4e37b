import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { outcome, spawnOnFullDisk } from '../fixtures/disk-full.ts';
import { freePort } from '../harness/free-port.ts';
import type { ChildProcess } from 'node:child_process';

const KEY = 'storage-failure-root-key-0001';
const dir = mkdtempSync(join(tmpdir(), 'cp-full-'));
let child: ChildProcess;
let run: Promise<{ code: number | null; output: string }>;
let url: string;

beforeAll(async () => {
  const port = await freePort();
  url = `http://127.0.0.1:${port}`;
  child = spawnOnFullDisk('control-plane/main.ts', [], 3_000_000, {
    SVC_DATA_DIR: dir,
    SVC_HTTP_HOST: '127.0.0.1',
    SVC_HTTP_PORT: String(port),
    SVC_GRPC_PORT: '0',
    SVC_BOOTSTRAP_ADMIN_KEY: KEY,
    SVC_LOG_LEVEL: 'info',
  });
  run = outcome(child);
  for (let i = 0; ; i++) {
    const status = await fetch(`${url}/health/ready`).then(
      (r) => r.status,
      () => 0,
    );
    if (status === 200) break;
    if (i > 200 || child.exitCode !== null) throw new Error(`control plane did not start:\n${(await run).output}`);
    await new Promise((r) => setTimeout(r, 50));
  }
});
afterAll(async () => {
  child.kill('SIGKILL');
  await run;
  rmSync(dir, { recursive: true, force: true });
});

const call = (method: string, path: string, body?: unknown) =>
  fetch(url + path, {
    method,
    headers: { 'x-api-key': KEY, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });

describe('a control-plane process whose disk is full', () => {
  it('refuses writes with a generic error, logs the cause, and goes on serving', async () => {
    // The largest tags a budget may carry (50 of 200 characters each) fill the 3 MB the disk allows.
    const tags = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`k${i}`.padEnd(200, 'k'), 'v'.repeat(200)]));
    let failed: Response | undefined;
    let created = 0;
    for (let i = 0; i < 1000 && failed === undefined; i++) {
      const res = await call('POST', '/v1/budgets', { name: `b${i}`, type: 'cost', limits: { max_cost_usd: 1 }, tags });
      if (res.status === 201) created++;
      else failed = res;
    }
    expect(created).toBeGreaterThan(0);
    expect(failed?.status).toBe(500);
    const body = (await failed!.json()) as { error: { code: string; message: string; request_id: string } };
    expect(body.error).toMatchObject({ code: 'SVC-SYS-9007', message: 'internal error' });

    expect((await fetch(`${url}/health/live`)).status).toBe(200);
    // Every budget written before the disk filled is still read, page by page.
    let listed = 0;
    for (let token: string | null = ''; token !== null;) {
      const page = await call(
        'GET',
        `/v1/budgets?page_size=100${token === '' ? '' : `&page_token=${encodeURIComponent(token)}`}`,
      );
      expect(page.status).toBe(200);
      listed += ((await page.json()) as unknown[]).length;
      token = page.headers.get('x-next-page-token');
    }
    expect(listed).toBe(created);
    const metrics = await (await fetch(`${url}/metrics`)).text();
    expect(metrics).toContain('svc_process_unhandled_rejections_total');
    expect(child.exitCode).toBeNull();

    child.kill('SIGTERM');
    const { output } = await run;
    const cause = output
      .split('\n')
      .find((l) => l.includes(`"request_id":"${body.error.request_id}"`) && l.includes('request failed'));
    expect(cause).toContain('Input/output error');
  });
});
