import { describe, expect, it } from 'vitest';
import { clientResponseHeaders, upstreamRequestHeaders } from './header-filter.ts';

describe('upstreamRequestHeaders', () => {
  it('drops hop-by-hop fields, those named in Connection, and every x-svc-* field whatever its case', () => {
    const out = upstreamRequestHeaders({
      connection: 'keep-alive, X-Trace-Hop',
      'keep-alive': 'timeout=5',
      'proxy-authorization': 'Basic abc',
      'proxy-connection': 'keep-alive',
      te: 'trailers',
      trailer: 'x-checksum',
      'transfer-encoding': 'chunked',
      upgrade: 'websocket',
      'x-trace-hop': '1',
      'X-SVC-Envelope-Id': 'env-1',
      'x-svc-tenant': 't1',
      host: 'api.openai.com',
      expect: '100-continue',
      authorization: 'Bearer sk-1',
      'content-type': 'application/json',
      'x-request-id': 'r-1',
    });
    expect(out).toEqual({ authorization: 'Bearer sk-1', 'content-type': 'application/json', 'x-request-id': 'r-1' });
  });

  it('drops what Connection names: one token whatever its case and spacing, or a list given as several values', () => {
    const out = upstreamRequestHeaders({ connection: ' X-Trace-Hop ', 'x-trace-hop': '1', accept: '*/*' });
    expect(out).toEqual({ accept: '*/*' });
    expect(clientResponseHeaders({ connection: ['close', 'x-a'], 'x-a': '1', close: '2', 'x-b': '3' })).toEqual({
      'x-b': '3',
    });
  });

  it('keeps Content-Length only for a body relayed as it arrived', () => {
    expect(upstreamRequestHeaders({ 'content-length': '12' }, true)).toEqual({ 'content-length': '12' });
    expect(upstreamRequestHeaders({ 'content-length': '12' }, false)).toEqual({});
  });
});

describe('clientResponseHeaders', () => {
  it('drops hop-by-hop fields from the upstream answer and keeps the rest, multi-valued ones included', () => {
    const out = clientResponseHeaders({
      connection: 'close',
      'transfer-encoding': 'chunked',
      'keep-alive': 'timeout=5',
      'content-type': 'text/event-stream',
      'set-cookie': ['a=1', 'b=2'],
      'x-svc-decision': 'allow',
    });
    expect(out).toEqual({
      'content-type': 'text/event-stream',
      'set-cookie': ['a=1', 'b=2'],
      'x-svc-decision': 'allow',
    });
  });
});
