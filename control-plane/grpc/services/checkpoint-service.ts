import { parseOrThrow } from '../../../core/errors/index.ts';
import {
  CheckpointQuerySchema,
  GetExecutionContextInputSchema,
  SaveCheckpointInputSchema,
  UpdateExecutionContextInputSchema,
  VersionSchema,
  type Checkpoint,
  type CheckpointOrder,
  type ExecutionContext,
} from '../../checkpoints/checkpoint.ts';
import type { Checkpoints } from '../../checkpoints/checkpoints.ts';
import type { ExecutionContexts } from '../../checkpoints/execution-contexts.ts';
import { MAX_PAGE_SIZE, type Page, type PageRequest } from '../../storage/storage.ts';
import {
  enumValue,
  fromStruct,
  fromTimestamp,
  invalidField,
  present,
  requiredId,
  toStruct,
  toTimestamp,
} from '../codec/well-known.ts';
import type { GrpcRequest, GrpcServiceHandlers } from '../server.ts';

type Message = Record<string, unknown>;

/** A canonical checkpoint as svc.checkpoint.v1.Checkpoint; lists and queries leave `data` out. */
export function toGrpcCheckpoint(c: Checkpoint, withData: boolean) {
  return {
    checkpoint_id: c.checkpoint_id,
    envelope_id: c.envelope_id,
    execution_id: c.execution_id,
    tenant_id: c.tenant_id,
    version: c.version,
    metadata: {
      type: `CHECKPOINT_TYPE_${c.metadata.type ?? 'UNSPECIFIED'}`,
      framework_type: c.metadata.framework_type ?? '',
      current_node: c.metadata.current_node ?? '',
      cost_snapshot_usd: c.metadata.cost_snapshot_usd,
      tags: c.metadata.tags,
    },
    data: withData ? toStruct(c.data) : null,
    created_at: toTimestamp(c.created_at),
    size_bytes: String(c.size_bytes),
    deleted_at: toTimestamp(c.deleted_at),
  };
}

function toGrpcContext(context: ExecutionContext) {
  return {
    execution_id: context.execution_id,
    tenant_id: context.tenant_id,
    values: toStruct(context.values),
    version: String(context.version),
    updated_at: toTimestamp(context.updated_at),
  };
}

/** Spec 8 paging: 0 asks for the default (20); above the maximum is lowered to it (100). */
function pageRequest(request: GrpcRequest): PageRequest {
  const size = Number(request.page_size ?? 0);
  if (!Number.isInteger(size) || size < 0) throw invalidField('page_size', 'must not be negative');
  return {
    ...(size === 0 ? {} : { pageSize: Math.min(size, MAX_PAGE_SIZE) }),
    pageToken: present(request.page_token) ?? null,
  };
}

function orderOf(request: GrpcRequest): CheckpointOrder {
  const given = (present(request.order_by) ?? 'created_at desc').trim().toLowerCase().replace(/\s+/g, ' ');
  if (given === 'created_at desc') return 'created_at desc';
  if (given === 'created_at' || given === 'created_at asc') return 'created_at asc';
  throw invalidField('order_by', 'one of "created_at desc" (the default) or "created_at asc"');
}

function versionOf(request: GrpcRequest): number {
  const parsed = VersionSchema.safeParse(request.version);
  if (!parsed.success) throw invalidField('version', 'an integer from 1');
  return parsed.data;
}

/** A typed optional (proto3 `optional`) number: absent stays absent, int64 strings become numbers. */
const optionalNumber = (value: unknown) => (value === undefined || value === null ? undefined : Number(value));

function checkpointPage(page: Page<Checkpoint>) {
  return { items: page.items.map((c) => toGrpcCheckpoint(c, false)), next_page_token: page.nextPageToken ?? '' };
}

function saveInput(request: GrpcRequest) {
  const checkpoint = request.checkpoint as Message | null;
  if (checkpoint === null || checkpoint === undefined) throw invalidField('checkpoint', 'required');
  const metadata = (checkpoint.metadata as Message | null) ?? {};
  return parseOrThrow(
    SaveCheckpointInputSchema,
    {
      checkpoint: {
        checkpoint_id: present(checkpoint.checkpoint_id),
        envelope_id: present(checkpoint.envelope_id),
        execution_id: present(checkpoint.execution_id),
        version: checkpoint.version,
        metadata: {
          type: enumValue(metadata.type, 'CHECKPOINT_TYPE_') ?? null,
          framework_type: present(metadata.framework_type) ?? null,
          current_node: present(metadata.current_node) ?? null,
          cost_snapshot_usd: metadata.cost_snapshot_usd ?? 0,
          tags: metadata.tags ?? {},
        },
        data:
          checkpoint.data === null || checkpoint.data === undefined
            ? undefined
            : fromStruct(checkpoint.data, 'checkpoint.data'),
      },
      auto_version: request.auto_version,
      max_versions: request.max_versions,
    },
    'request',
  );
}

function queryInput(query: Message) {
  return parseOrThrow(
    CheckpointQuerySchema,
    {
      tenant_ids: query.tenant_ids,
      envelope_ids: query.envelope_ids,
      execution_ids: query.execution_ids,
      types: (query.types as unknown[]).map((t) => enumValue(t, 'CHECKPOINT_TYPE_')),
      created_after: fromTimestamp(query.created_after, 'query.created_after'),
      created_before: fromTimestamp(query.created_before, 'query.created_before'),
      framework_types: query.framework_types,
      tags: query.tags,
      min_cost_usd: optionalNumber(query.min_cost_usd),
      max_cost_usd: optionalNumber(query.max_cost_usd),
      min_size_bytes: optionalNumber(query.min_size_bytes),
      max_size_bytes: optionalNumber(query.max_size_bytes),
    },
    'query',
  );
}

/** svc.checkpoint.v1.CheckpointService (spec 4.6) over the checkpoint and execution-context services. */
export function checkpointService(checkpoints: Checkpoints, contexts: ExecutionContexts): GrpcServiceHandlers {
  return {
    SaveCheckpoint: {
      largeRequest: true,
      access: 'checkpoints:write',
      tenantField: 'checkpoint.tenant_id',
      statuses: {
        409: 'the execution has that version, or the checkpoint id is another execution’s (SVC-SYS-9008)',
        422: 'the tenant has checkpoints for as many executions as it may (SVC-ADP-5007)',
      },
      handle: async (request, { caller }) => {
        const saved = await checkpoints.save(caller, saveInput(request));
        return {
          checkpoint_id: saved.checkpoint_id,
          version: saved.version,
          created_at: toTimestamp(saved.created_at),
          size_bytes: String(saved.size_bytes),
        };
      },
    },
    GetCheckpoint: {
      access: 'checkpoints:read',
      handle: async (request, { caller }) => {
        const version = Number(request.version ?? 0);
        const found = await checkpoints.get(
          caller.tenant,
          requiredId(request, 'checkpoint_id'),
          version === 0 ? 0 : versionOf(request),
        );
        return { checkpoint: toGrpcCheckpoint(found, true) };
      },
    },
    ListCheckpoints: {
      access: 'checkpoints:read',
      tenantField: 'tenant_id',
      handle: async (request, { caller }) => {
        const envelopeId = present(request.envelope_id);
        const executionId = present(request.execution_id);
        const query = parseOrThrow(
          CheckpointQuerySchema,
          {
            tenant_ids: [],
            envelope_ids: envelopeId === undefined ? [] : [envelopeId],
            execution_ids: executionId === undefined ? [] : [executionId],
            types: [],
            framework_types: [],
            tags: {},
          },
          'request',
        );
        const page = checkpointPage(
          await checkpoints.query(caller.tenant, query, orderOf(request), pageRequest(request)),
        );
        return { checkpoints: page.items, next_page_token: page.next_page_token };
      },
    },
    DeleteCheckpoint: {
      access: 'checkpoints:write',
      handle: async (request, { caller }) => {
        await checkpoints.delete(caller, requiredId(request, 'checkpoint_id'), {
          soft: request.soft_delete === true,
          allVersions: request.delete_all_versions === true,
        });
        return {};
      },
    },
    ListCheckpointVersions: {
      access: 'checkpoints:read',
      handle: async (request, { caller }) => {
        const page = checkpointPage(
          await checkpoints.versions(caller.tenant, requiredId(request, 'execution_id'), pageRequest(request)),
        );
        return { versions: page.items, next_page_token: page.next_page_token };
      },
    },
    GetCheckpointVersion: {
      access: 'checkpoints:read',
      handle: async (request, { caller }) => {
        const found = await checkpoints.getVersion(
          caller.tenant,
          requiredId(request, 'execution_id'),
          versionOf(request),
        );
        return { checkpoint: toGrpcCheckpoint(found, true) };
      },
    },
    QueryCheckpoints: {
      access: 'checkpoints:read',
      handle: async (request, { caller }) => {
        const query = request.query as Message | null;
        if (query === null || query === undefined) throw invalidField('query', 'required');
        const page = checkpointPage(
          await checkpoints.query(caller.tenant, queryInput(query), orderOf(request), pageRequest(request)),
        );
        return { checkpoints: page.items, next_page_token: page.next_page_token };
      },
    },
    GetExecutionContext: {
      largeRequest: true,
      access: 'checkpoints:read',
      handle: async (request, { caller }) => {
        const input = parseOrThrow(
          GetExecutionContextInputSchema,
          {
            execution_id: requiredId(request, 'execution_id'),
            keys: request.keys,
            include_inherited: request.include_inherited,
          },
          'request',
        );
        return { context: toGrpcContext(await contexts.get(caller.tenant, input)) };
      },
    },
    UpdateExecutionContext: {
      largeRequest: true,
      access: 'checkpoints:write',
      statuses: {
        409: 'the context changed since expected_version (SVC-ADP-5006)',
        422: 'the tenant has contexts for as many executions as it may (SVC-ADP-5007)',
      },
      handle: async (request, { caller }) => {
        if (request.updates === null || request.updates === undefined) throw invalidField('updates', 'required');
        const input = parseOrThrow(
          UpdateExecutionContextInputSchema,
          {
            execution_id: requiredId(request, 'execution_id'),
            updates: fromStruct(request.updates, 'updates'),
            delete_keys: request.delete_keys,
            expected_version: optionalNumber(request.expected_version),
            merge_strategy: enumValue(request.merge_strategy, 'MERGE_STRATEGY_') ?? 'LAST_WRITE_WINS',
          },
          'request',
        );
        return { context: toGrpcContext(await contexts.update(caller, input)) };
      },
    },
  };
}
