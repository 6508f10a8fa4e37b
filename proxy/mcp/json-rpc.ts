import { ERROR_CATALOGUE, type SvcCode } from '../../core/errors/index.ts';

export type RpcId = string | number | null;

export interface RpcRequest {
  id: RpcId | undefined;
  method: string;
  params: Record<string, unknown> | undefined;
}

function asRecord(value: unknown): Record<string, unknown> | undefined {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : undefined;
}

/** The requests in a JSON-RPC body (one message or a batch); anything else yields none. */
export function rpcRequests(body: unknown): RpcRequest[] {
  const messages = Array.isArray(body) ? body : [body];
  const out: RpcRequest[] = [];
  for (const message of messages) {
    const m = asRecord(message);
    if (m === undefined || typeof m.method !== 'string') continue;
    const id = typeof m.id === 'string' || typeof m.id === 'number' || m.id === null ? m.id : undefined;
    out.push({ id, method: m.method, params: asRecord(m.params) });
  }
  return out;
}

/** A JSON-RPC error answer carrying the SVC code (spec 7.4: -32000 application error with data). */
export function rpcError(
  id: RpcId | undefined,
  code: SvcCode,
  message: string,
  data: Record<string, unknown>,
): Record<string, unknown> {
  return {
    jsonrpc: '2.0',
    id: id ?? null,
    error: { code: ERROR_CATALOGUE[code].jsonrpc, message: `${code}: ${message}`, data: { code, ...data } },
  };
}

/** Drops the tools `allowed` refuses from every result carrying a tools list whose id is in `ids`. */
export function filterToolsInMessage(
  message: unknown,
  ids: ReadonlySet<RpcId>,
  allowed: (tool: string) => boolean,
): { message: unknown; changed: boolean } {
  if (Array.isArray(message)) {
    let changed = false;
    const out = message.map((m) => {
      const r = filterToolsInMessage(m, ids, allowed);
      changed ||= r.changed;
      return r.message;
    });
    return { message: out, changed };
  }
  const m = asRecord(message);
  const result = asRecord(m?.result);
  if (m === undefined || result === undefined || !Array.isArray(result.tools) || !ids.has(m.id as RpcId))
    return { message, changed: false };
  const tools = result.tools.filter((tool) => {
    const name = asRecord(tool)?.name;
    return typeof name !== 'string' || allowed(name);
  });
  if (tools.length === result.tools.length) return { message, changed: false };
  return { message: { ...m, result: { ...result, tools } }, changed: true };
}
