import { request, type ClientRequest, type IncomingMessage } from 'node:http';
import { connect } from 'nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../harness/control-plane.ts';
import { startNatsServer, type NatsServer } from '../harness/nats-server.ts';
import {
  controlPlaneProcess,
  FLEET_ROOT_KEY,
  killAllProcesses,
  removeDirs,
  type ControlPlaneProcess,
} from '../harness/processes.ts';

const GRACE_MS = 3_000;
let nats: NatsServer;
const planes: ControlPlaneProcess[] = [];

beforeAll(async () => {
  nats = await startNatsServer();
});
afterAll(async () => {
  await killAllProcesses();
  await nats.dispose();
  await removeDirs(planes.map((p) => p.dataDir));
});

async function started(): Promise<ControlPlaneProcess> {
  const cp = await controlPlaneProcess(nats.url, { SVC_SHUTDOWN_GRACE_MS: String(GRACE_MS) });
  planes.push(cp);
  await cp.start();
  return cp;
}

/**
 * A budget creation whose body arrives in two parts: the request is in flight from the first
 * byte until the second part is sent.
 */
function slowCreate(cp: ControlPlaneProcess, name: string) {
  const body = JSON.stringify({ name, type: 'cost', limits: { max_cost_usd: 1 } });
  const half = Math.floor(body.length / 2);
  let req!: ClientRequest;
  const answered = new Promise<{ status: number; body: string }>((resolve, reject) => {
    req = request(
      `${cp.url}/v1/budgets`,
      {
        method: 'POST',
        headers: {
          'x-api-key': FLEET_ROOT_KEY,
          'content-type': 'application/json',
          'content-length': String(Buffer.byteLength(body)),
        },
      },
      (res: IncomingMessage) => {
        let text = '';
        res.on('data', (chunk: Buffer) => (text += chunk.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
  });
  const sentFirstPart = new Promise<void>((resolve) => req.write(body.slice(0, half), () => resolve()));
  return { answered, sentFirstPart, finish: () => req.end(body.slice(half)) };
}

/** Whether the process still takes new requests: a refused connection or a 503 says it does not. */
async function takesRequests(cp: ControlPlaneProcess): Promise<boolean> {
  const status = await fetch(`${cp.url}/health/ready`).then(
    (r) => r.status,
    () => 0,
  );
  return status === 200;
}

describe('a control-plane process on SIGTERM', () => {
  it('stops taking requests, finishes the one in flight, hands its consumers back and exits 0', async () => {
    const cp = await started();
    const slow = slowCreate(cp, 'in-flight');
    await slow.sentFirstPart;
    // A request answered after it means the server accepted the slow one's connection before.
    expect((await fetch(`${cp.url}/health/live`)).status).toBe(200);
    const stopping = cp.stop();
    await eventually(
      () => takesRequests(cp),
      (takes) => !takes,
      5_000,
    );
    expect(cp.exit).toBeNull();

    slow.finish();
    const answer = await slow.answered;
    expect(answer.status, answer.body).toBe(201);
    await stopping;
    expect(cp.exit).toEqual({ code: 0, signal: null });

    // Nothing it pulled is left waiting for an acknowledgement from a process that is gone.
    const nc = await connect({ servers: nats.url });
    const jsm = await nc.jetstreamManager();
    for (const durable of ['event-processor', 'envelope-opener', 'envelope-terminator', 'violation-auditor'])
      expect((await jsm.consumers.info('SVC_EVENTS', durable)).num_ack_pending).toBe(0);
    await nc.close();

    await cp.start();
    const budgets = await cp.rest('GET', '/v1/budgets');
    expect((budgets.body as { name: string }[]).map((b) => b.name)).toContain('in-flight');
    await cp.stop();
  });

  it('exits within the configured grace while a request never finishes', async () => {
    const cp = await started();
    const slow = slowCreate(cp, 'never-finished');
    await slow.sentFirstPart;
    expect((await fetch(`${cp.url}/health/live`)).status).toBe(200);
    const cutOff = slow.answered.then(
      () => 'answered',
      () => 'cut',
    );
    const before = Date.now();
    await cp.stop();
    const took = Date.now() - before;
    expect(cp.exit).toEqual({ code: 0, signal: null });
    expect(took).toBeGreaterThanOrEqual(GRACE_MS - 200);
    expect(took).toBeLessThan(GRACE_MS + 4_000);
    expect(await cutOff).toBe('cut');
  });
});
