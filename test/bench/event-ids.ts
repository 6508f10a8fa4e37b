/**
 * The CPU time the control plane's LMDB store spends per event stored, by how the events' ids are
 * made: random (UUID version 4) or time-ordered (version 7), in a store that already holds
 * `stored` events of the same kind. A random id lands in a random leaf page of the event table,
 * so a batch writes about as many pages as it has events once the table outgrows a batch.
 *
 *   node test/bench/event-ids.ts [stored=500000] [measured=100000] [kind=both|v4|v7]
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { timeOrderedUuid } from '../../core/domain/index.ts';
import { LmdbStorage } from '../../control-plane/storage/lmdb/lmdb-storage.ts';
import type { StoredEvent } from '../../control-plane/storage/records.ts';

const stored = Number(process.argv[2] ?? 500_000);
const measured = Number(process.argv[3] ?? 100_000);
const kinds = (process.argv[4] ?? 'both') === 'both' ? ['v4', 'v7'] : [process.argv[4] as string];
const BATCH = 512;
const ENVELOPES = 50;

function event(id: string, i: number): StoredEvent {
  const at = new Date().toISOString();
  return {
    event_id: id,
    tenant_id: 'bench',
    envelope_id: `env-${i % ENVELOPES}`,
    budget_id: 'budget-bench',
    event_type: 'llm.call',
    timestamp: at,
    tokens: { input: 120, output: 40 },
    model: 'gpt-4o-mini',
    cost_usd: 0.000042,
    payload: { provider: 'openai', operation: 'chat', stream: false, request_id: `req-${i}`, tool_calls: [] },
    source: 'proxy:bench',
    cost_micros: 42,
    received_at: at,
  };
}

async function insert(storage: LmdbStorage, mint: () => string, from: number, count: number): Promise<void> {
  for (let i = from; i < from + count; i += BATCH) {
    const batch = Array.from({ length: Math.min(BATCH, from + count - i) }, (_, k) => event(mint(), i + k));
    await storage.withTransaction(async (tx) => {
      await tx.events.insertNew('bench', batch);
    });
  }
}

for (const kind of kinds) {
  const mint = kind === 'v7' ? () => timeOrderedUuid() : () => randomUUID();
  const dir = mkdtempSync(join(tmpdir(), 'bench-ids-'));
  const { storage } = await LmdbStorage.open({ path: dir });
  try {
    await insert(storage, mint, 0, stored);
    const cpu = process.cpuUsage();
    const wall = performance.now();
    await insert(storage, mint, stored, measured);
    const used = process.cpuUsage(cpu);
    const seconds = (performance.now() - wall) / 1000;
    console.log(
      `${kind}: ${measured} events into a store of ${stored}: ${(((used.user + used.system) / measured) | 0).toString()} µs CPU per event ` +
        `(user ${(used.user / measured).toFixed(1)}, system ${(used.system / measured).toFixed(1)}), ${(measured / seconds).toFixed(0)} events/s`,
    );
  } finally {
    await storage.close();
    await rm(dir, { recursive: true, force: true });
  }
}
