/**
 * Sustained rate of the control plane's event processor: N usage events are published to a real
 * nats-server (JetStream, de-duplicated by id) while the processor is stopped; then the processor
 * starts and drains the backlog, applying it to storage (LMDB or PostgreSQL) in batches. The drain
 * time is the processor's own rate, and this process's CPU time over it (all its threads: LMDB's
 * writer, the garbage collector; not nats-server's) its cost per event, which varies less with the
 * machine's load than the rate does; the publish time is the producers' side. The drain's second
 * half is printed on its own: what a processor that has run a while spends, past the JIT's warm-up.
 * Prints figures; not a test.
 *
 *   node test/bench/event-processor.ts [events=20000] [envelopes=50] [--backend=lmdb|postgres]
 */
import { pino } from 'pino';
import type { Messaging } from '../../core/bus/bus.ts';
import { createMemoryMessaging } from '../../core/bus/memory-messaging.ts';
import { openNatsMessaging } from '../../core/bus/nats-messaging.ts';
import { subjects } from '../../core/bus/subjects.ts';
import { timeOrderedUuid } from '../../core/domain/time-ordered-id.ts';
import { startNatsServer } from '../harness/nats-server.ts';
import { benchUsageEvent } from './usage-event.ts';
import { benchArguments, benchControlPlane, benchTenantBudget } from './bench-storage.ts';

const { backend, args } = benchArguments();
const total = Number(args[0] ?? 20_000);
const envelopes = Number(args[1] ?? 50);
const IN_FLIGHT = 1_000;
const logger = pino({ level: 'silent' });
/** Under `--trace-gc`, lines between the collector's that say where the drain is (test/bench/gc-promoted.ts). */
const mark = process.execArgv.includes('--trace-gc')
  ? (what: string) => console.log(`drain: ${what}`)
  : () => undefined;

async function run(label: string, messaging: Messaging, publisher: Messaging): Promise<void> {
  const { plane, config, close } = await benchControlPlane(backend, messaging, logger);
  const budget = await benchTenantBudget(plane);
  const envelopeIds = Array.from({ length: envelopes }, () => timeOrderedUuid());

  await plane.processor.stop();
  const started = performance.now();
  let next = 0;
  const publishOne = async (): Promise<void> => {
    while (next < total) {
      const i = next++;
      const event = benchUsageEvent(envelopeIds[i % envelopes]!, budget.budget_id);
      await publisher.bus.publish(subjects.event('bench', 'llm.call'), event, { msgId: event.event_id });
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, publishOne));
  const published = performance.now();
  const cpuBefore = process.cpuUsage();
  const threadBefore = process.threadCpuUsage();
  mark(`starts, ${label}`);
  await plane.processor.start({ batchSize: config.processor_batch_size, maxWaitMs: config.processor_max_wait_ms });
  const drained = () => plane.processor.stats.applied + plane.processor.stats.duplicates;
  // The drain's second half, from the first poll past its middle: the first batches run before the
  // JIT has optimized the path (and in process while the backlog just published is promoted), which
  // weighs in a drain of some thousand events (docs/performance.md).
  let half: { at: number; cpu: NodeJS.CpuUsage; thread: NodeJS.CpuUsage; events: number } | undefined;
  while (drained() < total) {
    await new Promise((r) => setTimeout(r, 5));
    if (half === undefined && drained() >= total / 2) {
      half = { at: performance.now(), cpu: process.cpuUsage(), thread: process.threadCpuUsage(), events: drained() };
      mark('second half');
    }
  }
  const applied = performance.now();
  mark('ends');
  const cpu = process.cpuUsage(cpuBefore);
  const thread = process.threadCpuUsage(threadBefore);
  const halfCpu = half === undefined ? undefined : process.cpuUsage(half.cpu);
  const halfThread = half === undefined ? undefined : process.threadCpuUsage(half.thread);
  // The main thread runs the processor and the bus: its CPU per event bounds the rate.
  const perEvent = (used: NodeJS.CpuUsage, events: number) => ((used.user + used.system) / events).toFixed(1);

  const usage = (await plane.services.budgets.get('bench', budget.budget_id)).usage;
  const seconds = (applied - published) / 1000;
  console.log(`${backend}, ${label}: ${total} events over ${envelopes} envelopes`);
  console.log(
    `  published in      ${((published - started) / 1000).toFixed(2)} s  (${Math.round(total / ((published - started) / 1000))} events/s, ${IN_FLIGHT} publishes in flight)`,
  );
  console.log(
    `  drained in        ${seconds.toFixed(2)} s  (${Math.round(total / seconds)} events/s sustained by the processor)`,
  );
  console.log(
    `  CPU               ${((cpu.user + cpu.system) / 1e6).toFixed(2)} s over the drain (${perEvent(cpu, total)} µs per event, this process's threads; main thread ${perEvent(thread, total)})`,
  );
  if (half !== undefined && halfCpu !== undefined && halfThread !== undefined && half.events < total) {
    const events = total - half.events;
    const halfSeconds = (applied - half.at) / 1000;
    console.log(
      `  second half       ${events} events in ${halfSeconds.toFixed(2)} s (${Math.round(events / halfSeconds)} events/s, CPU ${perEvent(halfCpu, events)} µs per event, main thread ${perEvent(halfThread, events)})`,
    );
  }
  console.log(
    `  batches           ${plane.processor.stats.batches} (mean ${(total / plane.processor.stats.batches).toFixed(1)} events per storage transaction)`,
  );
  console.log(
    `  budget llm_calls  ${usage.llm_calls} (expected ${total}), cost ${(usage.cost_micros / 1e6).toFixed(6)} USD`,
  );
  await close();
}

const memory = createMemoryMessaging({ logger });
await run('in-process bus', memory, memory);
await memory.close();

const nats = await startNatsServer();
const cpMessaging = await openNatsMessaging({ connection: { servers: nats.url, name: 'bench-cp' } }, logger);
const pubMessaging = await openNatsMessaging(
  { connection: { servers: nats.url, name: 'bench-proxy' }, manage: false },
  logger,
);
await run(`nats-server (${nats.url})`, cpMessaging, pubMessaging);
await pubMessaging.close();
await cpMessaging.close();
await nats.dispose();
