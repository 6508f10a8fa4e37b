import { afterAll, describe, expect, it, vi } from 'vitest';
import { SvcError } from '../../core/errors/index.ts';
import { createTokenCounter } from '../../core/metering/tokens.ts';
import { TextSample } from './text-sample.ts';
import { mayHaveReachedProvider } from './upstream-failure.ts';
import { upstreamSignal } from './upstream-signal.ts';

const failure = (cause: string) => new SvcError('SVC-ADP-5001', 'upstream unreachable', { cause });

describe('mayHaveReachedProvider', () => {
  it('is false only for failures to connect', () => {
    for (const cause of [
      'ECONNREFUSED',
      'ENOTFOUND',
      'UND_ERR_CONNECT_TIMEOUT',
      'ERR_TLS_CERT_ALTNAME_INVALID',
      'CERT_HAS_EXPIRED',
    ])
      expect(mayHaveReachedProvider(failure(cause)), cause).toBe(false);
  });

  it('is true for a failure after connecting, and for anything it cannot tell', () => {
    for (const cause of ['UND_ERR_SOCKET', 'ECONNRESET', 'UND_ERR_HEADERS_TIMEOUT', 'AbortError', 'Error'])
      expect(mayHaveReachedProvider(failure(cause)), cause).toBe(true);
    expect(mayHaveReachedProvider(new Error('no cause'))).toBe(true);
  });
});

describe('upstreamSignal', () => {
  it('outlives its client by the drain time, then aborts', () => {
    vi.useFakeTimers();
    try {
      const client = new AbortController();
      const upstream = upstreamSignal(client.signal, 1000, () => undefined);
      client.abort();
      vi.advanceTimersByTime(999);
      expect(upstream.signal.aborted).toBe(false);
      vi.advanceTimersByTime(1);
      expect(upstream.signal.aborted).toBe(true);
    } finally {
      vi.useRealTimers();
    }
  });

  it('never aborts once disposed, nor while the client stays', () => {
    vi.useFakeTimers();
    try {
      const client = new AbortController();
      const stays = upstreamSignal(client.signal, 10, () => undefined);
      vi.advanceTimersByTime(1000);
      expect(stays.signal.aborted).toBe(false);
      const left = vi.fn();
      const done = upstreamSignal(client.signal, 10, left);
      done.dispose();
      client.abort();
      vi.advanceTimersByTime(1000);
      expect(done.signal.aborted).toBe(false);
      expect(left).not.toHaveBeenCalled();
    } finally {
      vi.useRealTimers();
    }
  });

  it('tells once that its client left, as it leaves or at once if it has', () => {
    const client = new AbortController();
    const leaving = vi.fn();
    const upstream = upstreamSignal(client.signal, 1000, leaving);
    expect(leaving).not.toHaveBeenCalled();
    client.abort();
    client.abort();
    expect(leaving).toHaveBeenCalledTimes(1);
    const gone = vi.fn();
    const late = upstreamSignal(client.signal, 1000, gone);
    expect(gone).toHaveBeenCalledTimes(1);
    upstream.dispose();
    late.dispose();
  });
});

describe('TextSample', () => {
  const tokens = createTokenCounter();
  afterAll(() => tokens.free());

  it('counts a small body exactly, across chunks', async () => {
    const sample = new TextSample();
    const text = 'The quick brown fox jumps over the lazy dog. '.repeat(10);
    const bytes = Buffer.from(text);
    sample.push(bytes.subarray(0, 7));
    sample.push(bytes.subarray(7));
    expect(sample.totalBytes).toBe(bytes.length);
    expect(await sample.tokens(tokens, 'gpt-4o')).toBe(tokens.countText('gpt-4o', text));
  });

  it('scales a large body from its first 64 KiB without holding the rest', async () => {
    const sample = new TextSample();
    const chunk = Buffer.from('lorem ipsum dolor sit amet '.repeat(4096));
    for (let i = 0; i < 10; i++) sample.push(chunk);
    const head = Buffer.concat(Array.from({ length: 10 }, () => chunk)).subarray(0, 64 * 1024);
    const counted = tokens.countText('gpt-4o', head.toString('utf8'));
    expect(await sample.tokens(tokens, 'gpt-4o')).toBe(Math.ceil((counted * chunk.length * 10) / (64 * 1024)));
    expect(await new TextSample().tokens(tokens, 'gpt-4o')).toBe(0);
  });
});
