/**
 * `POST /v1/envelopes` over HTTP at a number of keep-alive connections, one request in flight on
 * each, against a control plane on a fresh store: what a client fleet sees of envelope creation,
 * HTTP, authentication, validation and the durable commit included. Prints figures; not a test.
 *
 *   node test/bench/envelope-create-http.ts [requests=3000] [connections=16] [--backend=lmdb|postgres]
 */
import { pino } from 'pino';
import { Pool } from 'undici';
import { createMemoryMessaging } from '../../core/bus/memory-messaging.ts';
import { benchArguments, benchControlPlane, benchTenantBudget } from './bench-storage.ts';

const { backend, args } = benchArguments();
const total = Number(args[0] ?? 3_000);
const connections = Number(args[1] ?? 16);
const ADMIN_KEY = 'bench-envelope-http-admin-key-0001';
process.env.SVC_BOOTSTRAP_ADMIN_KEY = ADMIN_KEY;
process.env.SVC_RATE_LIMIT_PER_MINUTE = '100000000';
const logger = pino({ level: 'silent' });

const messaging = createMemoryMessaging({ logger });
const { plane, close } = await benchControlPlane(backend, messaging, logger);
const budget = await benchTenantBudget(plane);
const url = await plane.listen();
const pool = new Pool(url, { connections, pipelining: 1 });
const body = JSON.stringify({ budget_id: budget.budget_id, adapter_type: 'custom' });

async function run(label: string, count: number): Promise<void> {
  const latencies: number[] = [];
  let next = 0;
  let failed = 0;
  const worker = async (): Promise<void> => {
    while (next < count) {
      next++;
      const started = performance.now();
      const res = await pool.request({
        path: '/v1/envelopes',
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': ADMIN_KEY, 'x-tenant-id': 'bench' },
        body,
      });
      await res.body.text();
      if (res.statusCode !== 201) failed++;
      latencies.push(performance.now() - started);
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: connections }, worker));
  const seconds = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]!.toFixed(2);
  console.log(
    `${backend}, ${label}: ${count} requests in ${seconds.toFixed(2)} s (${Math.round(count / seconds)} per second, ` +
      `${failed} not 201), latency p50 ${at(0.5)} ms, p99 ${at(0.99)} ms`,
  );
}

await run('warm-up', Math.min(500, total));
await run(`${connections} connections`, total);
await pool.close();
await close();
await messaging.close();
