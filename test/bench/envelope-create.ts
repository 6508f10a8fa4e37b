/**
 * Envelope creation through the control plane's service (flow 1 without HTTP): the policy
 * decision with its audit record, then the budget's execution reservation, the envelope, its
 * indexes, audit record and outbox publication in one transaction. Run one at a time and with
 * many in flight, the way concurrent REST requests arrive. Prints figures, the process's CPU time
 * per envelope among them; not a test.
 *
 *   node test/bench/envelope-create.ts [envelopes=5000] [in-flight=32] [--backend=lmdb|postgres]
 */
import { pino } from 'pino';
import { createMemoryMessaging } from '../../core/bus/memory-messaging.ts';
import { NO_LIMITS } from '../../core/domain/index.ts';
import { BENCH_CALLER, benchArguments, benchControlPlane } from './bench-storage.ts';

const { backend, args } = benchArguments();
const total = Number(args[0] ?? 5_000);
const inFlight = Number(args[1] ?? 32);
const logger = pino({ level: 'silent' });

const messaging = createMemoryMessaging({ logger });
const { plane, close } = await benchControlPlane(backend, messaging, logger);
const caller = BENCH_CALLER;
const budget = await plane.services.budgets.create(caller, {
  name: 'bench',
  type: 'cost',
  period: 'monthly',
  limits: { ...NO_LIMITS, max_cost_usd: 1e9 },
});

async function run(label: string, count: number, parallel: number): Promise<void> {
  const latencies: number[] = [];
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < count) {
      next++;
      const started = performance.now();
      await plane.services.envelopes.create(caller, { budget_id: budget.budget_id, adapter_type: 'custom' });
      latencies.push(performance.now() - started);
    }
  };
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  await Promise.all(Array.from({ length: parallel }, worker));
  const seconds = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]!.toFixed(2);
  console.log(
    `${backend}, ${label}: ${count} envelopes in ${seconds.toFixed(2)} s (${Math.round(count / seconds)} per second), ` +
      `latency p50 ${at(0.5)} ms, p99 ${at(0.99)} ms, CPU ${Math.round((cpu.user + cpu.system) / count)} µs per envelope`,
  );
}

await run('warm-up', Math.min(500, total), 1);
await run('one at a time', total, 1);
await run(`${inFlight} in flight`, total, inFlight);
await close();
await messaging.close();
