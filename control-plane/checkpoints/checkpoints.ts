import { randomUUID } from 'node:crypto';
import { timeOrderedUuid } from '../../core/domain/index.ts';
import { msgIds } from '../../core/bus/msg-ids.ts';
import { subjects } from '../../core/bus/subjects.ts';
import { SvcError } from '../../core/errors/index.ts';
import type { UsageEventMessage } from '../../core/events/messages.ts';
import type { AuditLog } from '../audit/audit-log.ts';
import { actorOf, type Caller } from '../caller.ts';
import type { EffectDispatcher } from '../effects/dispatcher.ts';
import type { Effects } from '../effects/effects.ts';
import type { CheckpointFilter, Page, PageRequest, Storage } from '../storage/storage.ts';
import {
  jsonBytes,
  MAX_CHECKPOINT_DATA_BYTES,
  type Checkpoint,
  type CheckpointOrder,
  type CheckpointQuery,
  type SaveCheckpointInput,
} from './checkpoint.ts';
import { checkpointNotFound, quotaReached, tooLarge } from './errors.ts';

export interface CheckpointDeps {
  storage: Storage;
  audit: AuditLog;
  effects: EffectDispatcher;
  clock: () => Date;
  /** SVC_CHECKPOINT_MAX_VERSIONS and SVC_CHECKPOINT_EXECUTIONS_PER_TENANT. */
  limits: { maxVersions: number; executionsPerTenant: number };
}

export interface DeleteOptions {
  /** Mark deleted instead of removing. */
  soft: boolean;
  /** Every version of the checkpoint's execution, not only those saved under its id. */
  allVersions: boolean;
}

/**
 * Checkpoints (spec 2.7, 4.6): saved by adapters per execution version, restored by id to resume.
 * A checkpoint id names the versions saved under it, all of one execution; versions count per
 * execution from 1 and are never given twice. Every surface saves, reads and deletes through here.
 */
export class Checkpoints {
  private readonly deps: CheckpointDeps;

  constructor(deps: CheckpointDeps) {
    this.deps = deps;
  }

  /**
   * Stores the checkpoint as a new version of its execution (the next one under `auto_version`,
   * else the one it carries), then drops the oldest versions past `max_versions` or the
   * configured bound, the lower. The envelope must be the tenant's; an execution new to the tenant
   * only while it has fewer than the configured number. Audited, and announced as
   * `events.checkpoint.saved`.
   */
  async save(caller: Caller, input: SaveCheckpointInput): Promise<Checkpoint> {
    const { checkpoint: given, auto_version: autoVersion, max_versions: maxVersions } = input;
    const size = jsonBytes(given.data);
    if (size > MAX_CHECKPOINT_DATA_BYTES) throw tooLarge('checkpoint.data', size, MAX_CHECKPOINT_DATA_BYTES);
    if (!autoVersion && given.version === 0) {
      const description = 'required (from 1) unless auto_version is set';
      throw new SvcError('SVC-SYS-9002', `invalid request: checkpoint.version: ${description}`, {}, [
        { field: 'checkpoint.version', description },
      ]);
    }
    const now = this.deps.clock().toISOString();
    const checkpoint: Checkpoint = {
      checkpoint_id: given.checkpoint_id ?? randomUUID(),
      tenant_id: caller.tenant,
      envelope_id: given.envelope_id,
      execution_id: given.execution_id,
      version: autoVersion ? 1 : given.version,
      metadata: given.metadata,
      data: given.data,
      size_bytes: size,
      created_at: now,
      deleted_at: null,
    };
    return this.deps.effects.commit(async (tx, effects) => {
      if ((await tx.envelopes.get(caller.tenant, given.envelope_id)) === undefined)
        throw new SvcError('SVC-ENV-1001', `envelope ${given.envelope_id} not found`, {
          envelope_id: given.envelope_id,
        });
      const { maxVersions: bound, executionsPerTenant } = this.deps.limits;
      if (!(await tx.checkpoints.admitExecution(caller.tenant, given.execution_id, executionsPerTenant)))
        throw quotaReached('checkpoints', 'SVC_CHECKPOINT_EXECUTIONS_PER_TENANT', executionsPerTenant);
      const stored = await tx.checkpoints.insert(caller.tenant, checkpoint, autoVersion ? 'next' : 'given');
      const keep = maxVersions > 0 ? Math.min(maxVersions, bound) : bound;
      const pruned = await tx.checkpoints.prune(caller.tenant, stored.execution_id, keep);
      await this.deps.audit.append(tx, caller.tenant, {
        actor: actorOf(caller.principal),
        action: 'checkpoint.save',
        resource: { type: 'checkpoint', id: stored.checkpoint_id },
        result: 'saved',
        metadata: {
          execution_id: stored.execution_id,
          envelope_id: stored.envelope_id,
          version: stored.version,
          size_bytes: stored.size_bytes,
          versions_pruned: pruned,
        },
      });
      announceSaved(effects, stored);
      return stored;
    });
  }

  /** Version `version` of the checkpoint's execution, or its newest version when 0. */
  async get(tenant: string, checkpointId: string, version: number): Promise<Checkpoint> {
    const read = this.deps.storage.read.checkpoints;
    const latest = await read.latest(tenant, checkpointId);
    if (latest === undefined) throw checkpointNotFound({ checkpoint_id: checkpointId });
    if (version === 0 || version === latest.version) return latest;
    const found = await read.get(tenant, latest.execution_id, version);
    if (found === undefined || found.checkpoint_id !== checkpointId)
      throw checkpointNotFound({ checkpoint_id: checkpointId, version });
    return found;
  }

  async getVersion(tenant: string, executionId: string, version: number): Promise<Checkpoint> {
    const found = await this.deps.storage.read.checkpoints.get(tenant, executionId, version);
    if (found === undefined) throw checkpointNotFound({ execution_id: executionId, version });
    return found;
  }

  /** The execution's versions that are not deleted, newest first. */
  versions(tenant: string, executionId: string, page: PageRequest): Promise<Page<Checkpoint>> {
    return this.deps.storage.read.checkpoints.versions(tenant, executionId, page);
  }

  /**
   * The tenant's checkpoints (not deleted) matching `query`. A query reads the tenant the call acts
   * for: `tenant_ids` that leave it out match nothing, never another tenant's checkpoints.
   */
  async query(tenant: string, query: CheckpointQuery, order: CheckpointOrder, page: PageRequest) {
    if (query.tenant_ids.length > 0 && !query.tenant_ids.includes(tenant)) return { items: [], nextPageToken: null };
    const filter: CheckpointFilter = {
      envelopeIds: query.envelope_ids,
      executionIds: query.execution_ids,
      types: query.types,
      createdAfter: query.created_after,
      createdBefore: query.created_before,
      frameworkTypes: query.framework_types,
      tags: query.tags,
      minCostUsd: query.min_cost_usd,
      maxCostUsd: query.max_cost_usd,
      minSizeBytes: query.min_size_bytes,
      maxSizeBytes: query.max_size_bytes,
    };
    return this.deps.storage.read.checkpoints.query(tenant, filter, order, page);
  }

  /** Deletes (or marks deleted) the versions saved under the id, or every version of its execution. */
  async delete(caller: Caller, checkpointId: string, options: DeleteOptions): Promise<number> {
    const at = this.deps.clock().toISOString();
    return this.deps.effects.commit(async (tx) => {
      const latest = await tx.checkpoints.latest(caller.tenant, checkpointId);
      if (latest === undefined) throw checkpointNotFound({ checkpoint_id: checkpointId });
      const count = await tx.checkpoints.delete(
        caller.tenant,
        latest.execution_id,
        options.allVersions ? null : checkpointId,
        options.soft ? { soft: at } : 'hard',
      );
      await this.deps.audit.append(tx, caller.tenant, {
        actor: actorOf(caller.principal),
        action: 'checkpoint.delete',
        resource: { type: 'checkpoint', id: checkpointId },
        result: options.soft ? 'soft_deleted' : 'deleted',
        metadata: { execution_id: latest.execution_id, all_versions: options.allVersions, versions: count },
      });
      return count;
    });
  }
}

/** `events.checkpoint.saved`: the checkpoint family of spec 6.2, recorded on the envelope. */
function announceSaved(effects: Effects, c: Checkpoint): void {
  const eventId = timeOrderedUuid();
  const message: UsageEventMessage = {
    event_id: eventId,
    tenant_id: c.tenant_id,
    envelope_id: c.envelope_id,
    budget_id: null,
    event_type: 'checkpoint.saved',
    timestamp: c.created_at,
    tokens: { input: 0, output: 0 },
    model: null,
    cost_usd: null,
    payload: {
      checkpoint_id: c.checkpoint_id,
      execution_id: c.execution_id,
      version: c.version,
      size_bytes: c.size_bytes,
      type: c.metadata.type,
    },
    source: 'checkpoints',
  };
  effects.publications.push({
    subject: subjects.event(c.tenant_id, 'checkpoint.saved'),
    data: message,
    msgId: msgIds.event(c.tenant_id, eventId),
  });
}
