/**
 * `POST /v1/envelopes` over HTTP at a number of keep-alive connections, one request in flight on
 * each, against a control plane on a fresh store: what a client fleet sees of envelope creation,
 * HTTP, authentication, validation and the durable commit included. The control plane runs in a
 * process of its own (this script with `--serve`), so the client's work is not on its event
 * loop, and the control plane's CPU time per request is printed beside the latencies, with the
 * client's own: both share the machine's cores, so on a small machine the client's share bounds
 * the rate too. Prints figures; not a test.
 *
 *   node test/bench/envelope-create-http.ts [requests=3000] [connections=16] [--backend=lmdb|postgres]
 *
 * `BENCH_SERVER_FLAGS` gives the control plane's process Node flags (`--cpu-prof --cpu-prof-dir=…`).
 */
import { once } from 'node:events';
import { pino } from 'pino';
import { Pool } from 'undici';
import { createMemoryMessaging } from '../../core/bus/memory-messaging.ts';
import { benchArguments, benchControlPlane, benchTenantBudget } from './bench-storage.ts';
import { cpuMicros, startChild } from './children.ts';

const { backend, args } = benchArguments();
const ADMIN_KEY = 'bench-envelope-http-admin-key-0001';
process.env.SVC_BOOTSTRAP_ADMIN_KEY = ADMIN_KEY;
process.env.SVC_RATE_LIMIT_PER_MINUTE = '100000000';

interface Serving {
  url: string;
  budgetId: string;
}

/** The control plane, until the parent disconnects. */
async function serve(): Promise<void> {
  const logger = pino({ level: 'silent' });
  const messaging = createMemoryMessaging({ logger });
  const { plane, close } = await benchControlPlane(backend, messaging, logger);
  const budget = await benchTenantBudget(plane);
  const serving: Serving = { url: await plane.listen(), budgetId: budget.budget_id };
  process.once('disconnect', () => {
    void close()
      .then(() => messaging.close())
      .finally(() => process.exit(0));
  });
  process.send!(serving);
}

async function drive(): Promise<void> {
  const total = Number(args[0] ?? 3_000);
  const connections = Number(args[1] ?? 16);
  const [server, { url, budgetId }] = await startChild<Serving>(
    'envelope-create-http.ts',
    ['--serve', `--backend=${backend}`],
    (process.env.BENCH_SERVER_FLAGS ?? '').split(' ').filter(Boolean),
  );
  const pool = new Pool(url, { connections, pipelining: 1 });
  const body = JSON.stringify({ budget_id: budgetId, adapter_type: 'custom' });

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
    const cpuBefore = cpuMicros(server);
    const clientBefore = process.cpuUsage();
    const started = performance.now();
    await Promise.all(Array.from({ length: connections }, worker));
    const seconds = (performance.now() - started) / 1000;
    const cpu = (cpuMicros(server) - cpuBefore) / count;
    const clientUsed = process.cpuUsage(clientBefore);
    const clientCpu = (clientUsed.user + clientUsed.system) / count;
    latencies.sort((a, b) => a - b);
    const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]!.toFixed(2);
    console.log(
      `${backend}, ${label}: ${count} requests in ${seconds.toFixed(2)} s (${Math.round(count / seconds)} per second, ` +
        `${failed} not 201), latency p50 ${at(0.5)} ms, p90 ${at(0.9)} ms, p99 ${at(0.99)} ms, p99.9 ${at(0.999)} ms, control plane CPU ${Math.round(cpu)} µs per request, client CPU ${Math.round(clientCpu)} µs per request`,
    );
  }

  await run('warm-up', Math.min(500, total));
  await run(`${connections} connections`, total);
  await pool.close();
  server.disconnect();
  await once(server, 'exit');
}

if (process.argv.includes('--serve')) await serve();
else await drive();
