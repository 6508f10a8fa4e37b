import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startControlPlane, tenantWithKey, type RunningControlPlane } from '../harness/control-plane.ts';

const LIMIT = 64 * 1024;
let cp: RunningControlPlane;
let key: string;

beforeAll(async () => {
  cp = await startControlPlane({ body_limit_bytes: LIMIT });
  key = await tenantWithKey(cp, 'oversized');
});
afterAll(async () => {
  await cp?.close();
});

describe('a request body over the limit', () => {
  it('is answered 413 SVC-SYS-9009 every time, the client never cut off while it still sends', async () => {
    // Ten times the limit: far more than the socket buffers take at once, so the client is still
    // writing when the server has its answer.
    const body = JSON.stringify({ name: 'x'.repeat(LIMIT * 64) });
    for (const [method, path] of [
      ['POST', '/v1/budgets'],
      ['DELETE', '/v1/budgets/39820e58-3971-4c4c-945d-dd13b64e9c5e'],
      ['POST', '/v1/policies/evaluate'],
    ] as const) {
      for (let i = 0; i < 10; i++) {
        const res = await fetch(`${cp.url}${path}`, {
          method,
          headers: { 'content-type': 'application/json', 'x-api-key': key },
          body,
        });
        expect(res.status).toBe(413);
        expect(await res.json()).toMatchObject({ error: { code: 'SVC-SYS-9009' } });
      }
    }
  });
});
