/**
 * The bus's own cost per message over a real nats-server: N usage-event-sized messages are
 * published to JetStream, then one durable drains them in batches (`consumeBatches`, as the event
 * processor does) with a handler that only counts them, so what is measured is the pull, the
 * decoding and the acknowledgements. Prints this process's CPU time per message over the drain
 * (all its threads), the main thread's alone, and the rate; each round drains a fresh durable
 * from the stream's start (the first rounds carry the JIT's warm-up). Prints figures; not a test.
 *
 *   node test/bench/bus-drain.ts [messages=30000] [rounds=4] [batch=512]
 */
import { pino } from 'pino';
import { openNatsMessaging } from '../../core/bus/nats-messaging.ts';
import { subjects } from '../../core/bus/subjects.ts';
import { timeOrderedUuid } from '../../core/domain/time-ordered-id.ts';
import { startNatsServer } from '../harness/nats-server.ts';
import { benchUsageEvent } from './usage-event.ts';

const total = Number(process.argv[2] ?? 30_000);
const rounds = Number(process.argv[3] ?? 4);
const batchSize = Number(process.argv[4] ?? 512);
const IN_FLIGHT = 1_000;
const logger = pino({ level: 'silent' });

const nats = await startNatsServer();
const messaging = await openNatsMessaging({ connection: { servers: nats.url, name: 'bench-bus' } }, logger);

let next = 0;
const publishOne = async (): Promise<void> => {
  while (next < total) {
    next++;
    const event = benchUsageEvent(timeOrderedUuid(), timeOrderedUuid());
    await messaging.bus.publish(subjects.event('bench', 'llm.call'), event, { msgId: event.event_id });
  }
};
await Promise.all(Array.from({ length: IN_FLIGHT }, publishOne));

for (let round = 1; round <= rounds; round++) {
  let received = 0;
  const done = Promise.withResolvers<void>();
  const started = performance.now();
  const cpu = process.cpuUsage();
  const thread = process.threadCpuUsage();
  const subscription = await messaging.bus.consumeBatches(
    'svc.bench.events.>',
    `drain_${round}`,
    { batchSize, maxWaitMs: 20 },
    (messages, applied) => {
      applied();
      received += messages.length;
      if (received >= total) done.resolve();
      return Promise.resolve();
    },
  );
  await done.promise;
  const seconds = (performance.now() - started) / 1000;
  const used = process.cpuUsage(cpu);
  const main = process.threadCpuUsage(thread);
  console.log(
    `round ${round}: ${total} messages in ${seconds.toFixed(2)} s (${Math.round(total / seconds)}/s), CPU ${((used.user + used.system) / total).toFixed(2)} µs per message (main thread ${((main.user + main.system) / total).toFixed(2)})`,
  );
  await subscription.unsubscribe();
}
await messaging.close();
await nats.dispose();
