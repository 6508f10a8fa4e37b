import type { ConsumeCallback, Consumer, FetchOptions, JsMsg } from 'nats';
import { describe, expect, it } from 'vitest';
import { pullBatches } from './pull-batches.ts';

/**
 * A consumer whose one pull the test drives: it delivers messages and ends the pull at will; a
 * close by the client ends it as the client does.
 */
function fakeConsumer(): {
  consumer: Consumer;
  deliver: (...seqs: number[]) => void;
  end: (error?: Error) => void;
  fetched: () => FetchOptions | undefined;
  closedByClient: () => boolean;
} {
  let options: (FetchOptions & ConsumeCallback) | undefined;
  let closedByClient = false;
  const closed = Promise.withResolvers<void | Error>();
  const consumer = {
    fetch: (opts: FetchOptions & ConsumeCallback) => {
      options = opts;
      return Promise.resolve({
        closed: () => closed.promise,
        close: () => {
          closedByClient = true;
          closed.resolve();
          return closed.promise;
        },
      });
    },
  } as unknown as Consumer;
  return {
    consumer,
    deliver: (...seqs) => {
      for (const seq of seqs) options!.callback!({ seq } as JsMsg);
    },
    end: (error) => closed.resolve(error),
    fetched: () => options,
    closedByClient: () => closedByClient,
  };
}

const seqs = (batch: JsMsg[]): number[] => batch.map((msg) => msg.seq);

/** Runs one pull of `pull` and records the sequences of each batch it hands over. */
function collect(
  pull: ReturnType<typeof fakeConsumer>,
  batchSize: number,
  maxWaitMs: number,
  signal = new AbortController().signal,
): { batches: number[][]; done: Promise<void> } {
  const batches: number[][] = [];
  const done = pullBatches(pull.consumer, { batchSize, maxWaitMs, expiresMs: 1_000 }, signal, (batch) => {
    batches.push(seqs(batch));
    return Promise.resolve();
  });
  return { batches, done };
}
const tick = (ms = 0): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

describe('pullBatches', () => {
  it('pulls batchSize messages once and hands them over in order, a batch when full', async () => {
    const pull = fakeConsumer();
    const { batches, done } = collect(pull, 3, 60_000);
    await tick();
    expect(pull.fetched()).toMatchObject({ max_messages: 3, expires: 1_000 });
    pull.deliver(1, 2, 3);
    await tick();
    expect(batches).toEqual([[1, 2, 3]]);
    pull.end();
    await done;
    expect(batches).toEqual([[1, 2, 3]]);
  });

  it('cuts a batch maxWaitMs after its first message, and hands over what is left when the pull ends', async () => {
    const pull = fakeConsumer();
    const { batches, done } = collect(pull, 10, 20);
    await tick();
    pull.deliver(1, 2);
    await tick(5);
    expect(batches).toEqual([]);
    await tick(40);
    expect(batches).toEqual([[1, 2]]);
    pull.deliver(3);
    pull.end();
    await done;
    expect(batches).toEqual([[1, 2], [3]]);
  });

  it('hands the next batch over only once the one before has been taken', async () => {
    const pull = fakeConsumer();
    const events: string[] = [];
    const first = Promise.withResolvers<void>();
    const options = { batchSize: 2, maxWaitMs: 60_000, expiresMs: 1_000 };
    const done = pullBatches(pull.consumer, options, new AbortController().signal, async (batch) => {
      events.push(`start ${seqs(batch).join(',')}`);
      if (batch[0]!.seq === 1) await first.promise;
      events.push(`end ${seqs(batch).join(',')}`);
    });
    await tick();
    pull.deliver(1, 2, 3, 4);
    await tick();
    expect(events).toEqual(['start 1,2']);
    first.resolve();
    pull.end();
    await done;
    expect(events).toEqual(['start 1,2', 'end 1,2', 'start 3,4', 'end 3,4']);
  });

  it('closes the pull when its signal aborts, and still hands over what it brought', async () => {
    const pull = fakeConsumer();
    const stopping = new AbortController();
    const { batches, done } = collect(pull, 10, 60_000, stopping.signal);
    await tick();
    pull.deliver(1, 2);
    expect(pull.closedByClient()).toBe(false);
    stopping.abort();
    expect(pull.closedByClient()).toBe(true);
    await done;
    expect(batches).toEqual([[1, 2]]);
  });

  it('throws the error a pull ended with, after handing over what it brought', async () => {
    const pull = fakeConsumer();
    const { batches, done } = collect(pull, 5, 60_000);
    await tick();
    pull.deliver(1);
    pull.end(new Error('consumer deleted'));
    await expect(done).rejects.toThrow('consumer deleted');
    expect(batches).toEqual([[1]]);
  });
});
