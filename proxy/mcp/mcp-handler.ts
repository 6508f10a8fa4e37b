import { once } from 'node:events';
import { isSvcError } from '../../core/errors/index.ts';
import { ENVELOPE_HEADER, type Resolution } from '../envelopes/index.ts';
import type { GovernanceDeps } from '../governance/governance-deps.ts';
import { readBody } from '../governance/read-body.ts';
import { governToolCall } from '../governance/tool-calls.ts';
import type { ProxiedRequest } from '../listener/index.ts';
import { relayResponse, type UpstreamResponse } from '../upstream/index.ts';
import { filterToolsInMessage, rpcError, rpcRequests, type RpcId } from './json-rpc.ts';
import { createSseRewriter } from './sse-rewriter.ts';

/**
 * MCP over streamable HTTP through the proxy. `tools/call` is evaluated as `tool:<name>` and
 * refused with a JSON-RPC error when denied (recorded either way); answers to `tools/list`,
 * JSON or SSE, lose the tools the ruleset denies, so a model is never offered them. Every other
 * message (initialize, notifications, the GET event stream, DELETE) passes through unchanged.
 */
export async function governMcp(deps: GovernanceDeps, req: ProxiedRequest): Promise<void> {
  if (req.method !== 'POST') return forward(deps, req, req.hasBody ? req.body : null, new Set());
  const bytes = await readBody(req.body, deps.bodyLimitBytes);
  let message: unknown;
  try {
    message = JSON.parse(bytes.toString('utf8'));
  } catch {
    // Not JSON-RPC: the server answers it as it sees fit.
    return forward(deps, req, bytes, new Set());
  }
  const requests = rpcRequests(message);
  let resolution: Resolution;
  try {
    resolution = deps.envelopes.resolve(req.headers);
  } catch (error) {
    // A budget this sidecar may not charge: every request is refused, nothing reaches the server.
    if (!isSvcError(error)) throw error;
    const answers = requests.map((r) => rpcError(r.id, error.code, error.message, error.details));
    const text = JSON.stringify(
      Array.isArray(message) ? answers : (answers[0] ?? rpcError(null, error.code, error.message, error.details)),
    );
    req.clientRes.writeHead(error.spec.http, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(text),
      'x-request-id': req.id,
    });
    req.clientRes.end(text);
    return;
  }
  const { envelope, opened } = resolution;
  if (opened) void deps.recorder.opened(envelope);

  const refusals: Record<string, unknown>[] = [];
  for (const call of requests) {
    if (call.method !== 'tools/call') continue;
    const name = typeof call.params?.name === 'string' ? call.params.name : '';
    const server = req.route ?? req.targetUrl.host;
    if (envelope.ending !== null) {
      refusals.push(
        rpcError(call.id, 'SVC-ENV-1003', `envelope ${envelope.envelopeId} already ended (${envelope.ending.status})`, {
          envelope_id: envelope.envelopeId,
        }),
      );
      continue;
    }
    const verdict = governToolCall(deps, envelope, name, 'mcp', {
      mcp_server: server,
      envelope_id: envelope.envelopeId,
      execution_id: envelope.executionId,
      budget_id: envelope.budgetId,
      arguments: call.params?.arguments,
    });
    if (!verdict.allowed) {
      refusals.push(
        rpcError(call.id, verdict.code, verdict.message, {
          policy_id: verdict.result?.matched_policy ?? null,
          denied_action: `tool:${name}`,
        }),
      );
    }
  }
  if (refusals.length > 0) {
    // A batch with a refused call is refused whole: forwarding part of it would answer out of step.
    const text = JSON.stringify(Array.isArray(message) ? refusals : refusals[0]);
    req.clientRes.writeHead(200, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(text),
      [ENVELOPE_HEADER]: envelope.envelopeId,
      'x-request-id': req.id,
    });
    req.clientRes.end(text);
    return;
  }
  const listIds = new Set<RpcId>(
    requests.filter((r) => r.method === 'tools/list' && r.id !== undefined).map((r) => r.id as RpcId),
  );
  await forward(deps, req, bytes, listIds, envelope.envelopeId);
}

async function forward(
  deps: GovernanceDeps,
  req: ProxiedRequest,
  body: ProxiedRequest['body'] | Buffer | null,
  listIds: ReadonlySet<RpcId>,
  envelopeId?: string,
): Promise<void> {
  const headers = { ...req.headers };
  if (listIds.size > 0) headers['accept-encoding'] = 'identity';
  if (Buffer.isBuffer(body)) headers['content-length'] = String(body.length);
  const response = await deps.upstream.request({
    url: req.targetUrl,
    method: req.method,
    headers,
    body,
    signal: req.signal,
    provider: 'mcp',
    receivedAt: req.receivedAt,
  });
  if (envelopeId !== undefined) response.headers[ENVELOPE_HEADER] = envelopeId;
  if (listIds.size === 0 || response.statusCode >= 400) {
    await relayResponse(req.clientRes, response);
    return;
  }
  const allowed = (tool: string) =>
    deps.gate.check(`tool:${tool}`, { tool_name: tool, tool, source: 'mcp', listing: true }).allowed;
  const contentType = String(response.headers['content-type'] ?? '');
  if (contentType.includes('text/event-stream')) {
    await relayFilteredEvents(req, response, listIds, allowed);
    return;
  }
  const bytes = await readBody(response.body, Number.MAX_SAFE_INTEGER);
  let text = bytes.toString('utf8');
  try {
    const filtered = filterToolsInMessage(JSON.parse(text), listIds, allowed);
    if (filtered.changed) text = JSON.stringify(filtered.message);
  } catch {
    // Not JSON: relayed as received.
  }
  req.clientRes.writeHead(response.statusCode, {
    ...response.headers,
    'content-length': String(Buffer.byteLength(text)),
  });
  req.clientRes.end(text);
}

async function relayFilteredEvents(
  req: ProxiedRequest,
  response: UpstreamResponse,
  listIds: ReadonlySet<RpcId>,
  allowed: (tool: string) => boolean,
): Promise<void> {
  const headers = { ...response.headers };
  delete headers['content-length'];
  const res = req.clientRes;
  res.writeHead(response.statusCode, headers);
  res.flushHeaders();
  const rewriter = createSseRewriter((data) => {
    try {
      const filtered = filterToolsInMessage(JSON.parse(data), listIds, allowed);
      return filtered.changed ? JSON.stringify(filtered.message) : data;
    } catch {
      return data;
    }
  });
  try {
    for await (const chunk of response.body) {
      const out = rewriter.push(chunk as Buffer);
      if (out !== '' && !res.write(out)) await once(res, 'drain', { signal: req.signal });
    }
    res.end(rewriter.end());
  } catch {
    res.destroy();
  }
}
