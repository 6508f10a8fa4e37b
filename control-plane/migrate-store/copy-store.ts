import { SYSTEM_TENANT } from '../../core/domain/index.ts';
import { SvcError } from '../../core/errors/index.ts';
import type { AuditDraft } from '../audit/chain.ts';
import type { OutboxClaim } from '../../core/outbox/outbox-storage.ts';
import { MAX_PAGE_SIZE, type Page, type PageRequest, type Repositories, type Storage } from '../storage/storage.ts';

/** What was copied, per aggregate. */
export interface CopyReport {
  tenants: number;
  budgets: number;
  policies: number;
  apiKeys: number;
  approvals: number;
  envelopes: number;
  checkpoints: number;
  executionContexts: number;
  events: number;
  auditRecords: number;
  outbox: number;
}

/** Every page of a list, one at a time. */
async function* pages<T>(list: (page: PageRequest) => Promise<Page<T>>): AsyncGenerator<T[]> {
  let pageToken: string | null = null;
  do {
    const page = await list({ pageSize: MAX_PAGE_SIZE, pageToken });
    if (page.items.length > 0) yield page.items;
    pageToken = page.nextPageToken;
  } while (pageToken !== null);
}

/** Refuses a target that holds anything: the copy keeps ids and chains, which only an empty store can take. */
async function assertEmpty(target: Storage): Promise<void> {
  const { read } = target;
  const held: string[] = [];
  if ((await read.tenants.list({ pageSize: 1 })).items.length > 0) held.push('tenants');
  const system = SYSTEM_TENANT;
  if ((await read.budgets.list(system, { pageSize: 1 })).items.length > 0) held.push('budgets');
  if ((await read.policies.version(system)) > 0) held.push('policies');
  if ((await read.apiKeys.list(system, { pageSize: 1 })).items.length > 0) held.push('API keys');
  if ((await read.envelopes.list(system, {}, { pageSize: 1 })).items.length > 0) held.push('envelopes');
  if ((await read.audit.head(system)) !== undefined) held.push('audit records');
  if (held.length > 0) {
    throw new SvcError(
      'SVC-SYS-9008',
      `the target store is not empty (it holds ${held.join(', ')}); migrate into a new, empty store`,
      { holds: held },
      [{ field: '--to', description: 'must name an empty store' }],
    );
  }
}

/**
 * Copies every aggregate of one store into another, empty one, through the storage interface only
 * (reads of the one, transactions of the other), so any two backends can be paired. The source
 * must not change meanwhile (its control plane stopped).
 *
 * Records keep their ids, timestamps, usage and hashed secrets (a migrated API key authenticates).
 * Each tenant's audit chain is appended in order to an empty chain, which seals every record to
 * the same sequence number and hash (sealing is deterministic); the target's head is then compared
 * with the source's and a difference fails the copy. Usage events keep their arrival order, policy
 * writes their ruleset version (proxies compare versions), budgets the spend proxies reported and
 * the processor has not applied yet and the proxies' report numbers counted. Checkpoints keep
 * their versions (soft-deleted ones too) and contexts theirs. Not copied, because they are
 * short-lived and rebuilt: budget leases (proxies ask again; until their old leases expire they
 * spend from their own reserve), background job leases, the message ids of denials already
 * audited, and an execution's memory of checkpoint versions deleted outright above its newest one
 * (they could be numbered again).
 */
export async function copyStore(
  source: Storage,
  target: Storage,
  progress: (line: string) => void = () => undefined,
): Promise<CopyReport> {
  await assertEmpty(target);
  const report: CopyReport = {
    tenants: 0,
    budgets: 0,
    policies: 0,
    apiKeys: 0,
    approvals: 0,
    envelopes: 0,
    checkpoints: 0,
    executionContexts: 0,
    events: 0,
    auditRecords: 0,
    outbox: 0,
  };
  const write = <T>(fn: (tx: Repositories) => Promise<T>): Promise<T> => target.withTransaction(fn);
  const { read } = source;

  const tenants = [SYSTEM_TENANT];
  for await (const page of pages((p) => read.tenants.list(p))) {
    const secrets = await Promise.all(page.map((t) => read.tenants.webhookSecret(t.tenant_id)));
    await write(async (tx) => {
      for (const [i, tenant] of page.entries()) {
        await tx.tenants.create(tenant);
        const secret = secrets[i];
        if (secret !== undefined) await tx.tenants.putWebhookSecret(tenant.tenant_id, secret);
      }
    });
    for (const tenant of page) if (tenant.tenant_id !== SYSTEM_TENANT) tenants.push(tenant.tenant_id);
    report.tenants += page.length;
  }

  for (const tenant of tenants) {
    for await (const page of pages((p) => read.budgets.list(tenant, p))) {
      // Spend proxies reported out of their leases and the processor has not applied yet, and the
      // report numbers counted, so that a report sent again after the move is counted once there.
      const pending = await Promise.all(
        page.map((b) => read.leases.pendingSpend(tenant, b.budget_id, b.usage.period_start)),
      );
      const reports = await Promise.all(page.map((b) => read.leases.reports(tenant, b.budget_id)));
      await write(async (tx) => {
        for (const [i, budget] of page.entries()) {
          await tx.budgets.insert(tenant, budget);
          const spend = pending[i]!;
          if (spend.tokens > 0 || spend.micros > 0)
            await tx.leases.addSpend(tenant, budget.budget_id, budget.usage.period_start, 'reported', spend);
          for (const r of reports[i]!)
            await tx.leases.claimReport(tenant, budget.budget_id, r.holder, r.seq, r.counted_at);
        }
      });
      report.budgets += page.length;
    }

    for await (const page of pages((p) => read.policies.list(tenant, p))) {
      await write(async (tx) => {
        for (const policy of page) await tx.policies.insert(tenant, policy);
      });
      report.policies += page.length;
    }
    const version = await read.policies.version(tenant);
    if (version > 0) {
      await write(async (tx) => {
        // The interface moves the version only by one; a ruleset's version counts its writes.
        while ((await tx.policies.bumpVersion(tenant)) < version);
      });
    }

    for await (const page of pages((p) => read.apiKeys.list(tenant, p))) {
      await write(async (tx) => {
        for (const key of page) await tx.apiKeys.insert(tenant, key);
      });
      report.apiKeys += page.length;
    }

    for await (const page of pages((p) => read.approvals.list(tenant, {}, p))) {
      await write(async (tx) => {
        for (const approval of page) await tx.approvals.insert(tenant, approval);
      });
      report.approvals += page.length;
    }

    for await (const page of pages((p) => read.envelopes.list(tenant, {}, p))) {
      await write(async (tx) => {
        for (const envelope of page) await tx.envelopes.insert(tenant, envelope, { executionTaken: 'keep' });
      });
      report.envelopes += page.length;
    }

    // Oldest first, so that each execution's versions keep their creation order.
    const everyCheckpoint = { includeDeleted: true } as const;
    for await (const page of pages((p) => read.checkpoints.query(tenant, everyCheckpoint, 'created_at asc', p))) {
      await write(async (tx) => {
        for (const checkpoint of page) await tx.checkpoints.insert(tenant, checkpoint, 'given');
      });
      report.checkpoints += page.length;
    }
    for await (const page of pages((p) => read.executionContexts.list(tenant, p))) {
      await write(async (tx) => {
        for (const context of page) await tx.executionContexts.put(tenant, context, 0);
      });
      report.executionContexts += page.length;
    }

    report.events += await copyEvents(source, write, tenant);
    report.auditRecords += await copyAudit(source, target, write, tenant);
    progress(`tenant ${tenant} copied`);
  }

  report.outbox = await copyOutbox(source, write);
  return report;
}

/**
 * Events are listed newest first; they are stored oldest first, so that the target lists them in
 * the same order. The page tokens of one pass (one per hundred events) are walked back in a second.
 */
async function copyEvents(
  source: Storage,
  write: <T>(fn: (tx: Repositories) => Promise<T>) => Promise<T>,
  tenant: string,
): Promise<number> {
  const tokens: (string | null)[] = [];
  let pageToken: string | null = null;
  do {
    tokens.push(pageToken);
    pageToken = (await source.read.events.list(tenant, {}, { pageSize: MAX_PAGE_SIZE, pageToken })).nextPageToken;
  } while (pageToken !== null);
  let copied = 0;
  for (const token of tokens.reverse()) {
    const page = await source.read.events.list(tenant, {}, { pageSize: MAX_PAGE_SIZE, pageToken: token });
    if (page.items.length === 0) continue;
    copied += (await write((tx) => tx.events.insertNew(tenant, page.items.toReversed()))).length;
  }
  return copied;
}

async function copyAudit(
  source: Storage,
  target: Storage,
  write: <T>(fn: (tx: Repositories) => Promise<T>) => Promise<T>,
  tenant: string,
): Promise<number> {
  let copied = 0;
  for await (const page of pages((p) => source.read.audit.list(tenant, { order: 'oldest' }, p))) {
    await write(async (tx) => {
      for (const record of page) {
        const draft: AuditDraft = {
          audit_id: record.audit_id,
          timestamp: record.timestamp,
          actor: record.actor,
          action: record.action,
          resource: record.resource,
          result: record.result,
          metadata: record.metadata,
        };
        await tx.audit.append(tenant, draft);
      }
    });
    copied += page.length;
  }
  const [was, is] = [await source.read.audit.head(tenant), await target.read.audit.head(tenant)];
  if (was?.seq !== is?.seq || was?.hash !== is?.hash) {
    throw new SvcError('SVC-SYS-9007', `audit chain of tenant ${tenant} differs after the copy`, {
      tenant_id: tenant,
      source_seq: was?.seq ?? 0,
      target_seq: is?.seq ?? 0,
    });
  }
  return copied;
}

/** Publications committed and not yet sent: they go out from the target's outbox, in order. */
async function copyOutbox(
  source: Storage,
  write: <T>(fn: (tx: Repositories) => Promise<T>) => Promise<T>,
): Promise<number> {
  const claims: OutboxClaim[] = [];
  let copied = 0;
  try {
    for (;;) {
      const claim = await source.outbox.claim(MAX_PAGE_SIZE);
      claims.push(claim);
      if (claim.entries.length === 0) break;
      await write((tx) => tx.outbox.append(claim.entries.map((e) => e.event)));
      copied += claim.entries.length;
    }
  } finally {
    // The source keeps them: a copy never changes the store it reads.
    await Promise.all(claims.map((c) => c.settle([])));
  }
  return copied;
}
