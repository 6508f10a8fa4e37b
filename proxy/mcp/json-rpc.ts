import { ERROR_CATALOGUE, type SvcCode } from '../../core/errors/index.ts';
import { foldKey } from '../governance/strict-json.ts';

export type RpcId = string | number | null;

/** JSON-RPC 2.0 error codes (spec 7.4). */
export const RPC_PARSE_ERROR = -32700;
export const RPC_INVALID_REQUEST = -32600;
export const RPC_INVALID_PARAMS = -32602;

export interface ToolCallRequest {
  id: RpcId | undefined;
  name: string;
  arguments: unknown;
}

/** A message the proxy will not forward, and the JSON-RPC error code that says why. */
export interface RpcRefusal {
  id: RpcId | undefined;
  rpcCode: number;
  message: string;
}

export interface RpcReading {
  batch: boolean;
  /** Ids of the requests in the body: each gets an answer if the body is refused. */
  requestIds: RpcId[];
  calls: ToolCallRequest[];
  /** The body asks for a tools list, so its answer must be filtered. */
  listsTools: boolean;
  refusals: RpcRefusal[];
}

const GOVERNED = new Set(['tools/call', 'tools/list']);
const MESSAGE_KEYS = ['jsonrpc', 'id', 'method', 'params', 'result', 'error'];
const CALL_KEYS = ['name', 'arguments'];

/**
 * A key a server decoding without regard to case (Go's encoding/json) takes for one of `keys`,
 * written otherwise: `"Method"` is no method to the proxy and the method to such a server.
 */
function misspelt(record: Record<string, unknown>, keys: readonly string[]): string | undefined {
  return Object.keys(record).find((key) => !keys.includes(key) && keys.includes(foldKey(key)));
}

function asRecord(value: unknown): Record<string, unknown> | undefined {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : undefined;
}

/** A name with case, width, spacing and invisible characters taken out, for spotting near-misses. */
export function foldName(name: string): string {
  return name
    .normalize('NFKC')
    .replace(/[\s\p{C}]/gu, '')
    .toLowerCase();
}

function isRpcId(value: unknown): value is RpcId {
  return typeof value === 'string' || typeof value === 'number' || value === null;
}

/**
 * Reads a JSON-RPC body (one message or a batch) for governance. Every `tools/call` is listed,
 * in a batch as well; what a lenient server could still take for a call or a listing, while the
 * proxy cannot be sure what it names, is a refusal: a method that is `tools/call` up to case,
 * spacing or invisible characters, a non-string method, a batch inside a batch, params that are
 * not an object, a tool name that is not a plain non-empty string, an id of another type.
 * Other messages (responses, notifications, other methods) are the server's to answer.
 */
export function readRpcBody(body: unknown): RpcReading {
  const batch = Array.isArray(body);
  const reading: RpcReading = { batch, requestIds: [], calls: [], listsTools: false, refusals: [] };
  const refuse = (id: RpcId | undefined, rpcCode: number, message: string) =>
    reading.refusals.push({ id, rpcCode, message });
  for (const message of batch ? (body as unknown[]) : [body]) {
    if (Array.isArray(message)) {
      refuse(undefined, RPC_INVALID_REQUEST, 'a batch may not contain a batch');
      continue;
    }
    const m = asRecord(message);
    if (m === undefined) continue;
    const messageKey = misspelt(m, MESSAGE_KEYS);
    if (messageKey !== undefined) {
      refuse(undefined, RPC_INVALID_REQUEST, `key "${messageKey}" is not written as ${foldKey(messageKey)}`);
      continue;
    }
    if (!('method' in m)) continue;
    const idValid = !('id' in m) || isRpcId(m.id);
    const id = idValid ? (m.id as RpcId | undefined) : undefined;
    if (id !== undefined) reading.requestIds.push(id);
    const method = m.method;
    if (typeof method !== 'string') {
      refuse(id, RPC_INVALID_REQUEST, 'method must be a string');
      continue;
    }
    if (!GOVERNED.has(method)) {
      if (GOVERNED.has(foldName(method))) {
        refuse(id, RPC_INVALID_REQUEST, `method "${method}" is not written as tools/call or tools/list`);
      }
      continue;
    }
    if (!idValid) {
      refuse(undefined, RPC_INVALID_REQUEST, 'id must be a string, a number or null');
      continue;
    }
    if (method === 'tools/list') {
      reading.listsTools = true;
      continue;
    }
    const params = asRecord(m.params);
    if (params === undefined) {
      refuse(id, RPC_INVALID_PARAMS, 'tools/call params must be an object');
      continue;
    }
    const callKey = misspelt(params, CALL_KEYS);
    if (callKey !== undefined) {
      refuse(id, RPC_INVALID_PARAMS, `tools/call params key "${callKey}" is not written as ${foldKey(callKey)}`);
      continue;
    }
    const name = params.name;
    if (typeof name !== 'string' || name === '' || /[\s\p{C}]/u.test(name)) {
      refuse(id, RPC_INVALID_PARAMS, 'tools/call params.name must be a non-empty string without spaces or controls');
      continue;
    }
    reading.calls.push({ id, name, arguments: params.arguments });
  }
  return reading;
}

/** A JSON-RPC error answer carrying the SVC code (spec 7.4); `rpcCode` overrides the catalogue's. */
export function rpcError(
  id: RpcId | undefined,
  code: SvcCode,
  message: string,
  data: Record<string, unknown>,
  rpcCode: number = ERROR_CATALOGUE[code].jsonrpc,
): Record<string, unknown> {
  return {
    jsonrpc: '2.0',
    id: id ?? null,
    error: { code: rpcCode, message: `${code}: ${message}`, data: { code, ...data } },
  };
}

/** Drops the tools `allowed` refuses from every result in `message` that carries a tools list. */
export function filterToolsInMessage(
  message: unknown,
  allowed: (tool: string) => boolean,
): { message: unknown; changed: boolean } {
  if (Array.isArray(message)) {
    let changed = false;
    const out = message.map((m) => {
      const r = filterToolsInMessage(m, allowed);
      changed ||= r.changed;
      return r.message;
    });
    return { message: out, changed };
  }
  const m = asRecord(message);
  const result = asRecord(m?.result);
  if (m === undefined || result === undefined || !Array.isArray(result.tools)) return { message, changed: false };
  // A listed tool whose name cannot be read cannot be judged, so it is not offered.
  const tools = result.tools.filter((tool) => {
    const name = asRecord(tool)?.name;
    return typeof name === 'string' && allowed(name);
  });
  if (tools.length === result.tools.length) return { message, changed: false };
  return { message: { ...m, result: { ...result, tools } }, changed: true };
}
