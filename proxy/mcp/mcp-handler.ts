import { once } from 'node:events';
import type { IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import { isSvcError, SvcError, type SvcCode } from '../../core/errors/index.ts';
import type { OutboxRoom } from '../../core/outbox/outbox.ts';
import { ENVELOPE_HEADER, whileInflight, type LocalEnvelope } from '../envelopes/index.ts';
import {
  contentCodings,
  DECODED_DROPS,
  decodeBody,
  decodedHeaders,
  decompressing,
  headersWithout,
  streamedHeaders,
} from '../governance/decode-body.ts';
import { envelopeFor } from '../governance/envelope-for.ts';
import type { GovernanceDeps } from '../governance/governance-deps.ts';
import { MAX_BODY_DEPTH, readBody, readRequestBody } from '../governance/read-body.ts';
import { UNRECORDED } from '../governance/llm-call/decide-call.ts';
import { recorded } from '../governance/llm-call/settlement.ts';
import { governHeldToolCall } from '../governance/tool-calls.ts';
import type { ProxiedRequest } from '../listener/index.ts';
import { createSseFramer, formatSseEvent } from '../providers/sse-framer.ts';
import { relayResponse, type UpstreamResponse } from '../upstream/index.ts';
import {
  filterToolsInMessage,
  readRpcBody,
  RPC_PARSE_ERROR,
  rpcError,
  type RpcId,
  type RpcReading,
  type RpcRefusal,
} from './json-rpc.ts';
import { parseStrictJson } from '../governance/strict-json.ts';

type Answer = Record<string, unknown>;

/**
 * MCP over streamable HTTP through the proxy. A POST body is decoded as a server would read it
 * (content codings, BOM, charset) and read as JSON-RPC; one the proxy cannot read is refused
 * with a parse error and never forwarded. Each `tools/call`, in a batch too, is evaluated as
 * `tool:<name>` and refused with a JSON-RPC error when denied (recorded either way); the server
 * gets the decoded body, exactly what was governed. Answers to `tools/list` and the GET event
 * stream lose the tools the ruleset denies, so a model is never offered them; such an answer the
 * proxy cannot read is refused, never relayed unfiltered. Other answers pass through unchanged.
 */
export async function governMcp(deps: GovernanceDeps, req: ProxiedRequest): Promise<void> {
  const streamOpen = req.method === 'GET';
  // Any body is read as JSON-RPC, whatever the method: a server may take a call from a PUT too.
  if (req.method !== 'POST' && !req.hasBody) {
    return forward(deps, req, null, req.headers, streamOpen ? NO_REQUESTS : null);
  }
  let body: Buffer;
  let headers: IncomingHttpHeaders;
  let message: unknown;
  try {
    const bytes = await readRequestBody(req, deps.bodyLimitBytes);
    const decoded = await decodeBody(bytes, req.headers, deps.bodyLimitBytes);
    const parsed = parseStrictJson(decoded.text, { maxDepth: MAX_BODY_DEPTH });
    if (!parsed.ok) throw new SvcError('SVC-SYS-9002', `request body is not JSON-RPC: ${parsed.reason}`);
    message = parsed.value;
    body = decoded.utf8;
    headers = decoded.changed ? decodedHeaders(req.headers, decoded) : req.headers;
  } catch (error) {
    if (!isSvcError(error)) throw error;
    // Spec 7.4: an unreadable body is a parse error; too large keeps the catalogue's code.
    const rpcCode = error.code === 'SVC-SYS-9009' ? undefined : RPC_PARSE_ERROR;
    answer(req, error.spec.http, rpcError(null, error.code, error.message, {}, rpcCode));
    return;
  }
  const reading = readRpcBody(message);
  if (reading.refusals.length > 0) {
    answer(req, 200, refusalAnswer(reading, reading.refusals, 'SVC-SYS-9002'));
    return;
  }
  const envelope = envelopeFor(deps, req.headers);
  if (isSvcError(envelope)) {
    // Every request is refused, nothing reaches the server.
    const refusals = reading.requestIds.map((id) => ({
      id,
      rpcCode: -32000,
      code: envelope.code,
      message: envelope.message,
      data: envelope.details,
    }));
    answer(
      req,
      envelope.spec.http,
      refusals.length > 0
        ? refusalAnswer(reading, refusals, envelope.code)
        : rpcError(null, envelope.code, envelope.message, envelope.details),
    );
    return;
  }

  // Counted before the pause is read, as a model call is: a call the pause holds is no part of
  // the rate the baselines learn, and one whose count pauses the envelope is held too.
  for (const _call of reading.calls) deps.anomalies.observe(envelope);
  // The tool calls of a paused envelope (or sidecar) wait for it to run again before anything is forwarded.
  if (deps.pauses.holds(envelope) && envelope.ending === null && reading.calls.length > 0) {
    const held = await whileInflight(envelope, (ended) =>
      deps.pauses.await(envelope, body.length, AbortSignal.any([req.signal, ended])),
    );
    if (held !== null && envelope.ending === null) {
      const ids = reading.calls.map((call) => call.id);
      const pausedRefusals = ids.map((id) => ({
        id,
        rpcCode: -32000,
        code: held.code,
        message: held.message,
        data: { envelope_id: envelope.envelopeId },
      }));
      answer(req, 200, refusalAnswer(reading, pausedRefusals, held.code), envelope.envelopeId);
      return;
    }
  }
  // Every tools/call is recorded, allowed or not: none is judged or sent unless its event can be.
  const rooms: OutboxRoom[] = [];
  for (const room of await Promise.all(reading.calls.map(() => deps.recorder.usageRoom()))) {
    if (room !== null) rooms.push(room);
  }
  if (rooms.length < reading.calls.length) {
    rooms.forEach((room) => room.release());
    const unrecorded = reading.calls.map((call) => ({
      id: call.id,
      rpcCode: -32000,
      code: 'SVC-EVT-4001' as const,
      message: UNRECORDED,
      data: { envelope_id: envelope.envelopeId },
    }));
    answer(req, 200, refusalAnswer(reading, unrecorded, 'SVC-EVT-4001'), envelope.envelopeId);
    return;
  }
  try {
    await judgeAndForward(deps, req, reading, envelope, body, headers, streamOpen, rooms);
  } finally {
    // The rooms of calls refused before they were judged (and so not recorded) go back.
    rooms.forEach((room) => room.release());
  }
}

/** Judges each tools/call of the body (recording it into its room), then forwards the body or refuses it whole. */
async function judgeAndForward(
  deps: GovernanceDeps,
  req: ProxiedRequest,
  reading: RpcReading,
  envelope: LocalEnvelope,
  body: Buffer,
  headers: IncomingHttpHeaders,
  streamOpen: boolean,
  rooms: readonly OutboxRoom[],
): Promise<void> {
  const refusals: (RpcRefusal & { code: SvcCode; data: Record<string, unknown> })[] = [];
  const server = req.route ?? req.targetUrl.host;
  const ended = (id: RpcRefusal['id'], when: string) => {
    const { ending } = envelope;
    return ending === null
      ? null
      : {
          id,
          rpcCode: -32000,
          code: 'SVC-ENV-1003' as const,
          message: `envelope ${envelope.envelopeId} ${when} (${ending.status})`,
          data: { envelope_id: envelope.envelopeId },
        };
  };
  for (const [i, call] of reading.calls.entries()) {
    const endedBefore = ended(call.id, 'already ended');
    if (endedBefore !== null) {
      refusals.push(endedBefore);
      continue;
    }
    const context = {
      mcp_server: server,
      tenant_id: deps.tenantId,
      workflow_id: deps.workflows.of(envelope.budgetId),
      adapter_type: 'mcp',
      envelope_id: envelope.envelopeId,
      execution_id: envelope.executionId,
      budget_id: envelope.budgetId,
      arguments: call.arguments,
    };
    // The arguments as the server will read them: what a SEMANTIC condition on `tool_args` judges.
    const args = JSON.stringify(call.arguments ?? {});
    // A server may match tool names without regard to case: so do the policy engine's actions and
    // its conditions on the name (docs/policy-engine.md), and one evaluation covers every spelling.
    // A call that needs an approval waits here for it, before anything is forwarded; the wait
    // ends early when the client leaves or the envelope ends meanwhile.
    const verdict = await governHeldToolCall(
      deps,
      envelope,
      { name: call.name, arguments: args },
      'mcp',
      context,
      req.signal,
      body.length,
      rooms[i],
    );
    const endedWhileHeld = verdict.allowed ? ended(call.id, 'ended while the call waited') : null;
    if (endedWhileHeld !== null) {
      refusals.push(endedWhileHeld);
      continue;
    }
    if (!verdict.allowed) {
      refusals.push({
        id: call.id,
        rpcCode: -32000,
        code: verdict.code,
        message: verdict.message,
        data: { policy_id: verdict.result?.matched_policy ?? null, denied_action: `tool:${call.name}` },
      });
    }
  }
  if (refusals.length > 0) {
    // A batch with a refused call is refused whole: forwarding part of it would answer out of step.
    answer(req, 200, refusalAnswer(reading, refusals, refusals[0]!.code), envelope.envelopeId);
    return;
  }
  await forward(deps, req, body, headers, reading.listsTools || streamOpen ? reading : null, envelope.envelopeId);
}

const NO_REQUESTS: Pick<RpcReading, 'batch' | 'requestIds'> = { batch: false, requestIds: [] };

/**
 * The answer to a refused body: each request in it gets an error, its own reason when it has
 * one, else that it was not forwarded because of the others.
 */
function refusalAnswer(
  reading: Pick<RpcReading, 'batch' | 'requestIds'>,
  refusals: readonly (RpcRefusal & { code?: SvcCode; data?: Record<string, unknown> })[],
  otherCode: SvcCode,
): Answer | Answer[] {
  const byId = new Map(refusals.filter((r) => r.id !== undefined).map((r) => [r.id, r]));
  const errors = refusals
    .filter((r) => r.id === undefined)
    .map((r) => rpcError(null, r.code ?? 'SVC-SYS-9002', r.message, r.data ?? {}, r.rpcCode));
  for (const id of new Set(reading.requestIds)) {
    const own = byId.get(id);
    errors.push(
      own === undefined
        ? rpcError(id, otherCode, 'not forwarded: another message in the same batch was refused', {})
        : rpcError(id, own.code ?? 'SVC-SYS-9002', own.message, own.data ?? {}, own.rpcCode),
    );
  }
  return reading.batch || errors.length !== 1 ? errors : errors[0]!;
}

function answer(req: ProxiedRequest, status: number, payload: Answer | Answer[], envelopeId?: string): void {
  const res = req.clientRes;
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const text = JSON.stringify(payload);
  const headers: Record<string, string | number> = {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    'x-request-id': req.id,
  };
  if (envelopeId !== undefined) headers[ENVELOPE_HEADER] = envelopeId;
  res.writeHead(status, headers);
  res.end(text);
}

/**
 * Sends the request on. `filtering` is set when the answer may carry a tools list: the requests
 * it answers (none for the GET event stream), for the error that refuses an unreadable answer.
 */
async function forward(
  deps: GovernanceDeps,
  req: ProxiedRequest,
  body: Readable | Buffer | null,
  headers: IncomingHttpHeaders,
  filtering: Pick<RpcReading, 'batch' | 'requestIds'> | null,
  envelopeId?: string,
): Promise<void> {
  const sent = { ...headers };
  if (filtering !== null) sent['accept-encoding'] = 'identity';
  if (Buffer.isBuffer(body)) sent['content-length'] = String(body.length);
  const response = await deps.upstream.request({
    url: req.targetUrl,
    method: req.method,
    headers: sent,
    body,
    signal: req.signal,
    provider: 'mcp',
    receivedAt: req.receivedAt,
  });
  // The tool calls it carries were recorded as they were let through: on disk before any of the
  // answer goes back, as every governed call is.
  await recorded(deps);
  if (envelopeId !== undefined) response.headers[ENVELOPE_HEADER] = envelopeId;
  if (filtering === null || response.statusCode >= 400) {
    await relayResponse(req.clientRes, response);
    return;
  }
  const allowed = (tool: string) => toolListed(deps, tool);
  const refuse = (code: SvcCode, message: string) => {
    response.body.destroy();
    answer(req, 200, refusalAnswer(filtering, [], code), envelopeId);
    deps.logger.warn({ request_id: req.id, code, err: message }, 'MCP tools list answer refused');
  };
  const contentType = String(response.headers['content-type'] ?? '').toLowerCase();
  if (contentType.includes('text/event-stream')) {
    await relayFilteredEvents(deps, req, response, filtering, allowed, refuse);
    return;
  }
  let text: string;
  try {
    const bytes = await readBody(response.body, deps.responseLimitBytes, {
      what: 'MCP server answer',
      declaredLength: response.headers['content-length'],
      rest: 'destroy',
    });
    text = (await decodeBody(bytes, response.headers, deps.responseLimitBytes)).text;
  } catch (error) {
    if (!isSvcError(error)) throw error;
    refuse(error.code === 'SVC-SYS-9009' ? error.code : 'SVC-ADP-5001', `MCP server answer refused: ${error.message}`);
    return;
  }
  if (text !== '') {
    const parsed = parseStrictJson(text);
    if (!parsed.ok) {
      refuse('SVC-ADP-5001', `MCP server answer to tools/list unreadable: ${parsed.reason}`);
      return;
    }
    const filtered = filterToolsInMessage(parsed.value, allowed);
    if (filtered.changed) text = JSON.stringify(filtered.message);
  }
  const out = Buffer.from(text, 'utf8');
  const replyHeaders: Record<string, string | string[]> = headersWithout(response.headers, DECODED_DROPS);
  replyHeaders['content-length'] = String(out.length);
  if (replyHeaders['content-type'] !== undefined) replyHeaders['content-type'] = 'application/json';
  req.clientRes.writeHead(response.statusCode, replyHeaders);
  req.clientRes.end(out);
}

/** A listed tool is offered only when its name, and its name in lower case, are both allowed. */
function toolListed(deps: GovernanceDeps, tool: string): boolean {
  const check = (name: string) =>
    deps.gate.check(`tool:${name}`, { tool_name: name, tool: name, source: 'mcp', listing: true }).allowed;
  return check(tool) && (tool.toLowerCase() === tool || check(tool.toLowerCase()));
}

/**
 * Relays an SSE answer event by event through the one SSE framer, tools lists filtered. An event
 * whose data is not JSON the proxy can read is dropped (the client could not read it either); an
 * event past the event limit ends the stream with a JSON-RPC error for the requests it answers.
 */
async function relayFilteredEvents(
  deps: GovernanceDeps,
  req: ProxiedRequest,
  response: UpstreamResponse,
  filtering: Pick<RpcReading, 'batch' | 'requestIds'>,
  allowed: (tool: string) => boolean,
  refuse: (code: SvcCode, message: string) => void,
): Promise<void> {
  const codings = contentCodings(response.headers);
  let source: Readable;
  try {
    source = decompressing(response.body, codings);
  } catch (error) {
    if (!isSvcError(error)) throw error;
    refuse('SVC-ADP-5001', `MCP server event stream refused: ${error.message}`);
    return;
  }
  const res = req.clientRes;
  res.writeHead(response.statusCode, streamedHeaders(response.headers));
  res.flushHeaders();
  const framer = createSseFramer((event) => {
    if (event.data === '') return true;
    const parsed = parseStrictJson(event.data);
    if (!parsed.ok) return false;
    const filtered = filterToolsInMessage(parsed.value, allowed);
    return filtered.changed ? formatSseEvent({ ...event, data: JSON.stringify(filtered.message) }) : true;
  }, deps.eventLimitBytes);
  try {
    for await (const chunk of source) {
      for (const out of framer.push(chunk as Buffer)) {
        if (out.length > 0 && !res.write(out)) await once(res, 'drain', { signal: req.signal });
      }
    }
    res.end(framer.end());
  } catch (error) {
    source.destroy();
    response.body.destroy();
    if (!isSvcError(error)) {
      res.destroy();
      return;
    }
    deps.logger.warn({ request_id: req.id, err: error.message }, 'MCP event stream cut');
    const ids: (RpcId | undefined)[] = filtering.requestIds.length > 0 ? filtering.requestIds : [undefined];
    for (const id of ids) {
      res.write(
        formatSseEvent({ event: 'message', data: JSON.stringify(rpcError(id, error.code, error.message, {})) }),
      );
    }
    res.end();
  }
}
