import { describe, expect, it } from 'vitest';
import { PendingBytes } from './pending-bytes.ts';

const text = (bytes: Uint8Array) => Buffer.from(bytes).toString();

describe('PendingBytes', () => {
  it('holds the events of one chunk as one view of it, with no copy', () => {
    // A buffer of its own: small Buffers share node's pool, where a copy could land too.
    const chunk = new Uint8Array(Buffer.from('data: a\n\ndata: b\n\ndata: c\n\n'));
    const pending = new PendingBytes();
    for (let at = 0; at < chunk.length; at += 9) pending.push(chunk.subarray(at, at + 9));
    const out = pending.take();
    expect(text(out)).toBe('data: a\n\ndata: b\n\ndata: c\n\n');
    expect(out.buffer).toBe(chunk.buffer);
    expect(out.byteOffset).toBe(0);
    expect(pending.empty).toBe(true);
  });

  it('keeps the order of bytes from elsewhere, of an event left out and of a tail', () => {
    const chunk = Buffer.from('data: a\n\ndata: usage\n\ndata: b\n\n');
    const pending = new PendingBytes();
    expect(pending.empty).toBe(true);
    pending.push(chunk.subarray(0, 9));
    // The event between is hidden: the next one does not follow on, so it starts a run of its own.
    pending.push(chunk.subarray(22));
    pending.push(new Uint8Array(0));
    pending.push(Buffer.from('data: rewritten\n\n'));
    expect(pending.empty).toBe(false);
    expect(text(pending.take(Buffer.from('event: error\ndata: {}\n\n')))).toBe(
      'data: a\n\ndata: b\n\ndata: rewritten\n\nevent: error\ndata: {}\n\n',
    );
    expect(pending.empty).toBe(true);
    expect(text(pending.take())).toBe('');
  });
});
