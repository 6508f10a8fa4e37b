import { describe, expect, it } from 'vitest';
import { createSseFramer, formatSseEvent } from '../providers/sse-framer.ts';
import { filterToolsInMessage, readRpcBody, rpcError } from './json-rpc.ts';

const list = { jsonrpc: '2.0', id: 2, result: { tools: [{ name: 'search' }, { name: 'delete_repo' }] } };
const allowed = (tool: string) => tool !== 'delete_repo';

describe('MCP message handling', () => {
  it('reads every tools/call of a batch and notes a tools/list', () => {
    const reading = readRpcBody([
      { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'x', arguments: { q: 1 } } },
      { jsonrpc: '2.0', method: 'notifications/initialized' },
      { jsonrpc: '2.0', id: 3, result: {} },
      { jsonrpc: '2.0', id: 'b', method: 'tools/call', params: { name: 'y' } },
      { jsonrpc: '2.0', id: 4, method: 'tools/list' },
    ]);
    expect(reading).toEqual({
      batch: true,
      requestIds: [1, 'b', 4],
      calls: [
        { id: 1, name: 'x', arguments: { q: 1 } },
        { id: 'b', name: 'y', arguments: undefined },
      ],
      listsTools: true,
      refusals: [],
    });
  });

  it.each([
    ['a method that is tools/call in another case', { id: 1, method: 'Tools/Call', params: { name: 'x' } }, -32600],
    ['a method with an invisible character', { id: 1, method: 'tools/\u200bcall', params: { name: 'x' } }, -32600],
    ['a method that is not a string', { id: 1, method: ['tools/call'], params: { name: 'x' } }, -32600],
    ['params as an array', { id: 1, method: 'tools/call', params: ['delete_repo', {}] }, -32602],
    ['no params', { id: 1, method: 'tools/call' }, -32602],
    ['a tool name that is not a string', { id: 1, method: 'tools/call', params: { name: ['delete_repo'] } }, -32602],
    ['a tool name with a space', { id: 1, method: 'tools/call', params: { name: 'delete_repo ' } }, -32602],
    ['an id that is an object', { id: { a: 1 }, method: 'tools/call', params: { name: 'x' } }, -32600],
    ['a batch in a batch', [[{ id: 1, method: 'tools/call', params: { name: 'x' } }]], -32600],
    ['a method key in another case', { id: 1, Method: 'tools/call', params: { name: 'x' } }, -32600],
    ['an id key in another case', { ID: 1, method: 'tools/call', params: { name: 'x' } }, -32600],
    ['a name key in another case', { id: 1, method: 'tools/call', params: { NAME: 'x' } }, -32602],
    ['an arguments key with the long s', { id: 1, method: 'tools/call', params: { name: 'x', argumentſ: {} } }, -32602],
  ])('refuses %s', (_label, message, rpcCode) => {
    const reading = readRpcBody(message);
    expect(reading.calls).toEqual([]);
    expect(reading.refusals.map((r) => r.rpcCode)).toEqual([rpcCode]);
  });

  it('filters every tools list in an answer, a tool without a readable name included', () => {
    expect(filterToolsInMessage(list, allowed)).toEqual({
      message: { ...list, result: { tools: [{ name: 'search' }] } },
      changed: true,
    });
    const odd = { ...list, result: { tools: [{ name: 'search' }, { title: 'no name' }, 'x'] } };
    expect(filterToolsInMessage([odd], allowed).message).toEqual([
      { ...list, result: { tools: [{ name: 'search' }] } },
    ]);
    expect(filterToolsInMessage({ id: 1, result: { content: [] } }, allowed).changed).toBe(false);
  });

  it('builds a JSON-RPC error carrying the SVC code, with the catalogue code or a given one', () => {
    expect(rpcError(4, 'SVC-POL-2001', 'denied', { denied_action: 'tool:x' })).toEqual({
      jsonrpc: '2.0',
      id: 4,
      error: { code: -32000, message: 'SVC-POL-2001: denied', data: { code: 'SVC-POL-2001', denied_action: 'tool:x' } },
    });
    expect(rpcError(undefined, 'SVC-SYS-9002', 'bad', {}, -32700)).toMatchObject({ id: null, error: { code: -32700 } });
  });

  it('rewrites SSE event data through the shared framer, whatever the chunk boundaries, keeping event and id', () => {
    const text = `event: message\nid: 7\ndata: ${JSON.stringify(list)}\n\n: keep-alive\n\n`;
    const framer = createSseFramer((event) => {
      const filtered = filterToolsInMessage(JSON.parse(event.data), allowed);
      return filtered.changed ? formatSseEvent({ ...event, data: JSON.stringify(filtered.message) }) : true;
    });
    const bytes = Buffer.from(text);
    let out = '';
    for (let i = 0; i < bytes.length; i += 7) {
      for (const piece of framer.push(bytes.subarray(i, i + 7))) out += Buffer.from(piece).toString();
    }
    out += Buffer.from(framer.end()).toString();
    expect(out).toBe(
      `event: message\nid: 7\ndata: ${JSON.stringify({ ...list, result: { tools: [{ name: 'search' }] } })}\n\n: keep-alive\n\n`,
    );
  });
});
