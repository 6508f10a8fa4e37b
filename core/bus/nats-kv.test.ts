import { setTimeout as sleep } from 'node:timers/promises';
import type { KvEntry, KvWatchOptions, NatsConnection } from 'nats';
import { describe, expect, it } from 'vitest';
import type { BusLogger, KeyValueEntry } from './bus.ts';
import type { NatsLink } from './nats-connection.ts';
import { NatsKeyValueStores } from './nats-kv.ts';

const quiet: BusLogger = { warn: () => undefined, error: () => undefined };
const encoder = new TextEncoder();

function entry(revision: number): KvEntry {
  return {
    bucket: 'b',
    key: `ruleset.t${revision}`,
    value: encoder.encode(JSON.stringify({ revision })),
    created: new Date(0),
    revision,
    delta: 0,
    operation: 'PUT',
    length: 0,
    json: () => ({}) as never,
    string: () => '',
  };
}

/**
 * The client's watch when every current value arrived before the watch was set up: the entries
 * are queued but not yet handed out, and `initializedFn` is called at once, before it returns.
 */
function watchWithEverythingArrived(entries: KvEntry[]) {
  return (options: KvWatchOptions) => {
    let stopped = false;
    options.initializedFn?.();
    async function* iterate(): AsyncGenerator<KvEntry> {
      for (const e of entries) yield e;
      while (!stopped) await sleep(5);
    }
    const iterator = Object.assign(iterate(), {
      getReceived: () => entries.length,
      stop: () => void (stopped = true),
    });
    return Promise.resolve(iterator);
  };
}

function linkTo(kv: unknown): NatsLink {
  const nc = { jetstream: () => ({ views: { kv: () => Promise.resolve(kv) } }) } as unknown as NatsConnection;
  return { nc, healthy: () => true, onReconnect: () => () => undefined, close: () => Promise.resolve() };
}

describe('NATS key-value watch', () => {
  it('resolves only once the current values are delivered, also when the client signals them before handing any out', async () => {
    const kv = { watch: watchWithEverythingArrived([entry(1), entry(2), entry(3)]) };
    const bucket = await new NatsKeyValueStores(linkTo(kv), quiet).open('svc_rulesets');
    const seen: KeyValueEntry[] = [];
    const watch = await bucket.watch('ruleset.>', async (e) => {
      await sleep(5);
      seen.push(e);
    });
    expect(seen.map((e) => e.revision)).toEqual([1, 2, 3]);
    await watch.unsubscribe();
  });
});
