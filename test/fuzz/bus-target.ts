import { mkdtempSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type JetStreamClient, type JetStreamManager, type NatsConnection, type PubAck } from 'nats';
import { startNatsServer, type NatsServer } from '../harness/nats-server.ts';
import {
  controlPlaneProcess,
  killAllProcesses,
  removeDirs,
  type ControlPlaneProcess,
  type RestAnswer,
} from '../harness/processes.ts';

/**
 * A spawned control plane on a real nats-server, seen only from outside: messages go in over a
 * raw NATS client, and what became of them comes back over REST, `/metrics`, the dead-letter
 * stream and the budget key-value bucket.
 */

/** Prices the suite sets, so that the expected cost of a priced event is known without the product's code. */
export const PRICED_MODEL = { id: 'fuzz-priced-model', inputPerMillion: 1.5, outputPerMillion: 4 } as const;
export const UNKNOWN_MODEL_RATE = { inputPerMillion: 3, outputPerMillion: 7 } as const;

export interface TenantIds {
  tenantId: string;
  budgets: { main: string; small: string; quiet: string };
  envelopes: Record<'e1' | 'e2' | 'e3' | 'e4' | 'capped' | 'loose' | 't1' | 't2', string>;
}

export interface DeadLetter {
  seq: number;
  subject: string;
  data: Uint8Array;
  headers: Record<string, string>;
}

export interface BusTarget {
  cp: ControlPlaneProcess;
  js: JetStreamClient;
  /** The tenant the generated messages are about. */
  home: TenantIds;
  /** A tenant nothing generated may change. */
  other: TenantIds;
  /** A tenant only the sentinels write to. */
  sentinel: TenantIds;
  /** Publishes in order on one connection (so stream order is call order) and returns the acks. */
  publish(messages: ReadonlyArray<{ subject: string; bytes: Uint8Array; msgId: string }>): Promise<PubAck[]>;
  rest(method: string, path: string, tenant?: string, body?: unknown): Promise<RestAnswer>;
  metrics(): Promise<string>;
  /** The dead letters stored after `afterSeq`, oldest first. */
  deadLetters(afterSeq: number): Promise<DeadLetter[]>;
  /** The budget state the control plane pushed to the proxies' bucket. */
  budgetState(tenant: string, budgetId: string): Promise<Record<string, unknown> | undefined>;
  close(): Promise<void>;
}

const DEAD_LETTER_STREAM = 'SVC_DEAD_LETTERS';

export async function startBusTarget(): Promise<BusTarget> {
  const server: NatsServer = await startNatsServer();
  const configDir = mkdtempSync(join(tmpdir(), 'bus-fuzz-'));
  const priceFile = join(configDir, 'prices.json');
  writeFileSync(
    priceFile,
    JSON.stringify({
      as_of: '2026-01-01',
      models: { [PRICED_MODEL.id]: { input: PRICED_MODEL.inputPerMillion, output: PRICED_MODEL.outputPerMillion } },
    }),
  );
  let nc: NatsConnection | undefined;
  let cp: ControlPlaneProcess | undefined;
  const close = async (): Promise<void> => {
    await cp?.stop().catch(() => undefined);
    await killAllProcesses();
    await nc?.close().catch(() => undefined);
    await server.dispose();
    await removeDirs([cp?.dataDir]);
    await rm(configDir, { recursive: true, force: true });
  };
  try {
    cp = await controlPlaneProcess(server.url, {
      SVC_PRICE_OVERRIDES_FILE: priceFile,
      SVC_UNKNOWN_MODEL_PRICE: `fixed:${UNKNOWN_MODEL_RATE.inputPerMillion}:${UNKNOWN_MODEL_RATE.outputPerMillion}`,
    });
    await cp.start();
    nc = await connect({ servers: server.url });
    const js = nc.jetstream();
    const jsm: JetStreamManager = await nc.jetstreamManager();
    const kv = await js.views.kv('svc_budgets', { bindOnly: true });
    const running = cp;
    const rest = (method: string, path: string, tenant?: string, body?: unknown): Promise<RestAnswer> =>
      running.rest(method, path, {
        ...(tenant !== undefined ? { tenant } : {}),
        ...(body !== undefined ? { body } : {}),
      });
    const [home, other, sentinel] = [
      await seedTenant(rest, 'fuzz-home', 'home'),
      await seedTenant(rest, 'fuzz-other', 'other'),
      await seedTenant(rest, 'fuzz-sentinel', 'sentinel'),
    ];
    return {
      cp,
      js,
      home,
      other,
      sentinel,
      publish: (messages) => Promise.all(messages.map((m) => js.publish(m.subject, m.bytes, { msgID: m.msgId }))),
      rest,
      metrics: async () => (await rest('GET', '/metrics')).body as string,
      async deadLetters(afterSeq) {
        const info = await jsm.streams.info(DEAD_LETTER_STREAM);
        const out: DeadLetter[] = [];
        for (let seq = Math.max(afterSeq + 1, info.state.first_seq); seq <= info.state.last_seq; seq++) {
          const stored = await jsm.streams.getMessage(DEAD_LETTER_STREAM, { seq });
          const headers: Record<string, string> = {};
          for (const [key, values] of stored.header ?? []) headers[key] = values[0] ?? '';
          out.push({ seq, subject: stored.subject, data: stored.data, headers });
        }
        return out;
      },
      async budgetState(tenant, budgetId) {
        const entry = await kv.get(`budget.${tenant}.${budgetId}`);
        return entry === null || entry.length === 0 ? undefined : entry.json<Record<string, unknown>>();
      },
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}

type Rest = (method: string, path: string, tenant?: string, body?: unknown) => Promise<RestAnswer>;

/**
 * A tenant with the budgets and envelopes the generated messages name:
 * - `main` (hybrid, alerts that end its envelopes once exhausted) and `small` (cost 5 USD):
 *   budgets usage events charge;
 * - `quiet` (no limits): the budget of the envelopes only terminations name;
 * - envelopes `e1`..`e3` on `main`, `e4` on `small`, `capped` on `main` with a 1 000-token limit of
 *   its own, `loose` on no budget, `t1` and `t2` on `quiet`.
 * Every budget's period is `total`, so no period ends during a run.
 */
async function seedTenant(rest: Rest, tenantId: string, label: string): Promise<TenantIds> {
  const must = async (path: string, body: unknown, asTenant = true) => {
    const res = await rest('POST', path, asTenant ? tenantId : undefined, body);
    if (res.status !== 201) throw new Error(`POST ${path} (${label}): ${res.status} ${JSON.stringify(res.body)}`);
    return res.body as Record<string, unknown>;
  };
  await must('/v1/tenants', { tenant_id: tenantId, name: tenantId }, false);
  const budget = async (name: string, body: Record<string, unknown>) =>
    String((await must('/v1/budgets', { name, period: 'total', ...body })).budget_id);
  const budgets = {
    main: await budget('main', { type: 'hybrid', limits: { max_tokens: 1e15, max_cost_usd: 1e9 } }),
    small: await budget('small', { type: 'cost', limits: { max_cost_usd: 5 } }),
    quiet: await budget('quiet', { type: 'hybrid', alerts: [] }),
  };
  const envelope = async (body: Record<string, unknown>) =>
    String((await must('/v1/envelopes', { adapter_type: 'custom', ...body })).envelope_id);
  const envelopes = {
    e1: await envelope({ budget_id: budgets.main }),
    e2: await envelope({ budget_id: budgets.main }),
    e3: await envelope({ budget_id: budgets.main }),
    e4: await envelope({ budget_id: budgets.small }),
    capped: await envelope({ budget_id: budgets.main, governance_context: { token_limit: 1000 } }),
    loose: await envelope({}),
    t1: await envelope({ budget_id: budgets.quiet }),
    t2: await envelope({ budget_id: budgets.quiet }),
  };
  return { tenantId, budgets, envelopes };
}
