/**
 * `POST /v1/envelopes` with the control plane and an undici client in this one process: `requests`
 * requests on `connections` keep-alive connections after a warm-up, on a fresh LMDB store. Prints
 * the process's CPU time per request (`process.cpuUsage`: every thread), which moves less with
 * the machine's load than `envelope-create-http.ts`'s rates and latencies. The client's work
 * counts too, the same in every build, so compare builds with it, not with the HTTP bench's
 * figures. Prints figures; not a test.
 *
 *   node test/bench/envelope-create-cpu.ts [requests=2000] [connections=16] [warm-up=500]
 */
import { loadavg } from 'node:os';
import { pino } from 'pino';
import { Pool } from 'undici';
import { createMemoryMessaging } from '../../core/bus/memory-messaging.ts';
import { benchControlPlane, benchTenantBudget } from './bench-storage.ts';

const requests = Number(process.argv[2] ?? 2_000);
const connections = Number(process.argv[3] ?? 16);
const warmUp = Number(process.argv[4] ?? 500);
const ADMIN_KEY = 'bench-envelope-cpu-admin-key-000000001';
process.env.SVC_BOOTSTRAP_ADMIN_KEY = ADMIN_KEY;
process.env.SVC_RATE_LIMIT_PER_MINUTE = '100000000';

const logger = pino({ level: 'silent' });
const messaging = createMemoryMessaging({ logger });
const { plane, close } = await benchControlPlane('lmdb', messaging, logger);
const budget = await benchTenantBudget(plane);
const pool = new Pool(await plane.listen(), { connections, pipelining: 1 });
const body = JSON.stringify({ budget_id: budget.budget_id, adapter_type: 'custom' });

async function drive(count: number): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (next < count) {
        next++;
        const res = await pool.request({
          path: '/v1/envelopes',
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-api-key': ADMIN_KEY, 'x-tenant-id': 'bench' },
          body,
        });
        const text = await res.body.text();
        if (res.statusCode !== 201) throw new Error(`status ${res.statusCode}: ${text}`);
      }
    }),
  );
}

await drive(warmUp);
const cpu = process.cpuUsage();
await drive(requests);
const spent = process.cpuUsage(cpu);
console.log(
  `${requests} requests on ${connections} connections, control plane and client in one process: ` +
    `${((spent.user + spent.system) / requests).toFixed(0)} µs CPU per request, load average ${loadavg()[0]!.toFixed(2)}`,
);
await pool.close();
await close();
await messaging.close();
