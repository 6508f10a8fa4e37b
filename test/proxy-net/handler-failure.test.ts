import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SvcError } from '../../core/errors/index.ts';
import { createLogger } from '../../core/observability/logger.ts';
import { startRig, type Rig } from './harness.ts';

let rig: Rig;
/** The lines of the process's own logger, as they would reach stdout. */
const logged: Array<Record<string, unknown>> = [];
beforeAll(async () => {
  const logger = createLogger({
    level: 'debug',
    service: 'proxy',
    destination: { write: (line: string) => void logged.push(JSON.parse(line) as Record<string, unknown>) },
  });
  rig = await startRig({
    logger,
    handler: (passThrough) => async (req) => {
      const path = req.targetUrl.pathname;
      if (path === '/boom') throw new Error('handler bug reading /srv/app/keys.json with sk-live-0123456789abcdef');
      if (path === '/refuse') throw new SvcError('SVC-ADP-5003', 'refused by the pipeline');
      if (path === '/late') {
        req.clientRes.writeHead(200, { 'content-type': 'text/plain' });
        req.clientRes.write('partial');
        throw new Error('failed after the headers were sent');
      }
      await passThrough(req);
    },
  });
});
afterAll(async () => {
  await rig.close();
});

describe('a failing handler', () => {
  it('fails its own request with 502 and the SVC code in the body while others succeed', async () => {
    const [boom, fine] = await Promise.all([
      fetch(`${rig.proxyUrl}/plain/boom`, {
        headers: { 'x-request-id': 'req-boom', authorization: 'Bearer sk-live-secret', 'x-api-key': 'sk-ant-secret' },
      }),
      fetch(`${rig.proxyUrl}/plain/ok`),
    ]);
    expect(boom.status).toBe(502);
    const body = (await boom.json()) as { error: { code: string; request_id: string; message: string } };
    expect(body.error.code).toBe('SVC-ADP-5001');
    expect(body.error.request_id).toBe('req-boom');
    // The thrown text stays in the proxy: the agent reads a fixed message with the code and id.
    expect(JSON.stringify(body)).not.toMatch(/handler bug|\/srv\/app|sk-live/);
    expect(fine.status).toBe(200);
    expect(await fine.json()).toEqual({ path: '/ok', method: 'GET' });

    // The failure is logged with the request's headers, its credentials redacted.
    const line = JSON.stringify(logged.find((entry) => JSON.stringify(entry).includes('req-boom')));
    expect(line).toContain('"authorization":"[redacted]"');
    expect(line).not.toContain('secret');
    const entry = logged.find((e) => JSON.stringify(e).includes('req-boom')) as { err: { message: string } };
    expect(entry.err.message).toContain('handler bug reading /srv/app/keys.json');
  });

  it('renders an SvcError with its own status and code', async () => {
    const res = await fetch(`${rig.proxyUrl}/plain/refuse`);
    expect(res.status).toBe(403);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('SVC-ADP-5003');
  });

  it('cuts a response whose headers were already sent, and the proxy keeps serving', async () => {
    await expect(fetch(`${rig.proxyUrl}/plain/late`).then((r) => r.text())).rejects.toThrow();
    expect((await fetch(`${rig.proxyUrl}/plain/ok`)).status).toBe(200);
  });
});
