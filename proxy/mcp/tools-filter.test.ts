import { describe, expect, it } from 'vitest';
import { filterToolsInMessage, rpcError, rpcRequests } from './json-rpc.ts';
import { createSseRewriter } from './sse-rewriter.ts';

const list = { jsonrpc: '2.0', id: 2, result: { tools: [{ name: 'search' }, { name: 'delete_repo' }] } };
const allowed = (tool: string) => tool !== 'delete_repo';

describe('MCP message handling', () => {
  it('reads requests from one message or a batch', () => {
    expect(
      rpcRequests([
        { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'x' } },
        { jsonrpc: '2.0', method: 'notifications/initialized' },
        { jsonrpc: '2.0', id: 3, result: {} },
      ]),
    ).toEqual([
      { id: 1, method: 'tools/call', params: { name: 'x' } },
      { id: undefined, method: 'notifications/initialized', params: undefined },
    ]);
  });

  it('filters the tools list of the answer to a tools/list request only', () => {
    expect(filterToolsInMessage(list, new Set([2]), allowed)).toEqual({
      message: { ...list, result: { tools: [{ name: 'search' }] } },
      changed: true,
    });
    expect(filterToolsInMessage(list, new Set([9]), allowed).changed).toBe(false);
  });

  it('builds a JSON-RPC application error carrying the SVC code', () => {
    expect(rpcError(4, 'SVC-POL-2001', 'denied', { denied_action: 'tool:x' })).toEqual({
      jsonrpc: '2.0',
      id: 4,
      error: { code: -32000, message: 'SVC-POL-2001: denied', data: { code: 'SVC-POL-2001', denied_action: 'tool:x' } },
    });
  });

  it('rewrites SSE event data as events complete, whatever the chunk boundaries, keeping event and id lines', () => {
    const text = `event: message\nid: 7\ndata: ${JSON.stringify(list)}\n\n: keep-alive\n\n`;
    const rewriter = createSseRewriter((data) =>
      JSON.stringify(filterToolsInMessage(JSON.parse(data), new Set([2]), allowed).message),
    );
    const bytes = Buffer.from(text);
    let out = '';
    for (let i = 0; i < bytes.length; i += 7) out += rewriter.push(bytes.subarray(i, i + 7));
    out += rewriter.end();
    expect(out).toBe(
      `event: message\nid: 7\ndata: ${JSON.stringify({ ...list, result: { tools: [{ name: 'search' }] } })}\n\n: keep-alive\n\n`,
    );
  });
});
