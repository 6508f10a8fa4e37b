import { jsonExcess, MAX_JSON_VALUES, parsedChildren } from '../../core/domain/index.ts';
import { SvcError, tooManyValues } from '../../core/errors/index.ts';
import type { AuditLog } from '../audit/audit-log.ts';
import { actorOf, type Caller } from '../caller.ts';
import type { EffectDispatcher } from '../effects/dispatcher.ts';
import type { Storage } from '../storage/storage.ts';
import {
  jsonBytes,
  MAX_CONTEXT_BYTES,
  type ExecutionContext,
  type GetExecutionContextInput,
  type UpdateExecutionContextInput,
} from './checkpoint.ts';
import { contextConflict, quotaReached, tooLarge } from './errors.ts';
import { applyUpdate, conflictingKey } from './merge.ts';

export interface ExecutionContextDeps {
  storage: Storage;
  audit: AuditLog;
  effects: EffectDispatcher;
  clock: () => Date;
  /** SVC_EXECUTION_CONTEXTS_PER_TENANT. */
  perTenant: number;
}

/**
 * Without `expected_version`, an update that lost a race to another writer reads again and
 * applies itself on top: a few rounds, so that a hot key ends in a conflict, not a spin.
 */
const UNCHECKED_ATTEMPTS = 5;

/**
 * The execution context (spec 2.7): key/value state the steps of an execution share, with a
 * version every update raises. Updates are compare-and-set on that version, so of concurrent
 * writers that read one version exactly one succeeds, on any replica.
 */
export class ExecutionContexts {
  private readonly deps: ExecutionContextDeps;

  constructor(deps: ExecutionContextDeps) {
    this.deps = deps;
  }

  /**
   * The context, only the `keys` asked for when any are. One never updated is empty at version 0.
   * Executions have no parents in this model, so `include_inherited` adds nothing.
   */
  async get(tenant: string, input: GetExecutionContextInput): Promise<ExecutionContext> {
    const stored =
      (await this.deps.storage.read.executionContexts.get(tenant, input.execution_id)) ??
      empty(tenant, input.execution_id);
    if (input.keys.length === 0) return stored;
    const wanted = new Set(input.keys);
    return { ...stored, values: Object.fromEntries(Object.entries(stored.values).filter(([key]) => wanted.has(key))) };
  }

  /**
   * Applies `updates` by the merge strategy, then removes `delete_keys`, in one step. A context new
   * to the tenant is refused with SVC-ADP-5007 once it has the configured number. Refused with
   * SVC-ADP-5006 when `expected_version` is set and is not the stored version, or when
   * FAIL_ON_CONFLICT finds an updated key holding another value; nothing is written then.
   */
  async update(caller: Caller, input: UpdateExecutionContextInput): Promise<ExecutionContext> {
    const strategy = input.merge_strategy;
    if (strategy === 'CUSTOM') {
      // Reserved for a merge an adapter defines; until one exists the request cannot be served.
      const description =
        'MERGE_STRATEGY_CUSTOM is not supported: no adapter defines a custom merge; use LAST_WRITE_WINS, FAIL_ON_CONFLICT or MERGE_RECURSIVE';
      throw new SvcError('SVC-SYS-9002', `invalid request: merge_strategy: ${description}`, {}, [
        { field: 'merge_strategy', description },
      ]);
    }
    const both = input.delete_keys.find((key) => Object.hasOwn(input.updates, key));
    if (both !== undefined) {
      const description = `${both} is also in updates`;
      throw new SvcError('SVC-SYS-9002', `invalid request: delete_keys: ${description}`, {}, [
        { field: 'delete_keys', description },
      ]);
    }
    const executionId = input.execution_id;
    const now = this.deps.clock().toISOString();
    return this.deps.effects.commit(async (tx) => {
      for (let attempt = 1; ; attempt += 1) {
        const stored =
          (await tx.executionContexts.get(caller.tenant, executionId)) ?? empty(caller.tenant, executionId);
        const { perTenant } = this.deps;
        if (stored.version === 0 && !(await tx.executionContexts.admit(caller.tenant, executionId, perTenant)))
          throw quotaReached('an execution context', 'SVC_EXECUTION_CONTEXTS_PER_TENANT', perTenant);
        if (input.expected_version !== undefined && input.expected_version !== stored.version)
          throw contextConflict(
            executionId,
            `version is ${stored.version}, not the expected ${input.expected_version}`,
            {
              expected_version: input.expected_version,
              version: stored.version,
            },
          );
        if (strategy === 'FAIL_ON_CONFLICT' && input.expected_version === undefined) {
          const key = conflictingKey(stored.values, input.updates);
          if (key !== undefined)
            throw contextConflict(executionId, `key ${key} holds another value`, { key, version: stored.version });
        }
        const values = applyUpdate(stored.values, input.updates, input.delete_keys, strategy);
        const size = jsonBytes(values);
        if (size > MAX_CONTEXT_BYTES) throw tooLarge('updates', size, MAX_CONTEXT_BYTES);
        // Each update is bounded, but the merged context must be too, or it could no longer be
        // read over gRPC (docs/grpc.md, Free-form JSON).
        if (jsonExcess(values, parsedChildren, MAX_JSON_VALUES, Infinity) !== undefined)
          throw tooManyValues('updates', MAX_JSON_VALUES);
        const next: ExecutionContext = {
          execution_id: executionId,
          tenant_id: caller.tenant,
          values,
          version: stored.version + 1,
          updated_at: now,
        };
        if (await tx.executionContexts.put(caller.tenant, next, stored.version)) {
          await this.deps.audit.append(tx, caller.tenant, {
            actor: actorOf(caller.principal),
            action: 'execution_context.update',
            resource: { type: 'execution_context', id: executionId },
            result: 'updated',
            metadata: {
              version: next.version,
              merge_strategy: strategy,
              updated_keys: Object.keys(input.updates),
              deleted_keys: input.delete_keys,
            },
          });
          return next;
        }
        // Another writer committed since the read.
        if (input.expected_version !== undefined || attempt >= UNCHECKED_ATTEMPTS)
          throw contextConflict(executionId, 'changed by a concurrent update', {
            expected_version: input.expected_version ?? stored.version,
          });
      }
    });
  }
}

function empty(tenant: string, executionId: string): ExecutionContext {
  return { execution_id: executionId, tenant_id: tenant, values: {}, version: 0, updated_at: null };
}
