import { Readable } from 'node:stream';
import { brotliCompressSync, deflateRawSync, deflateSync, gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { isSvcError } from '../../core/errors/index.ts';
import { charsetOf, decodeBody, decodedHeaders, decompressing, streamedHeaders } from './decode-body.ts';

const json = '{"method":"tools/call","params":{"name":"délete"}}';

async function codeOf(run: () => Promise<unknown>): Promise<string | undefined> {
  try {
    await run();
  } catch (error) {
    return isSvcError(error) ? error.code : `not an SvcError: ${String(error)}`;
  }
  return undefined;
}

describe('decodeBody', () => {
  it('leaves a plain UTF-8 body as it is', async () => {
    const bytes = Buffer.from(json);
    expect(await decodeBody(bytes, { 'content-type': 'application/json' }, 1000)).toEqual({
      text: json,
      utf8: bytes,
      changed: false,
    });
  });

  it('passes a UTF-8 body on as the very bytes received, and refuses bytes that are not UTF-8', async () => {
    const bytes = Buffer.from(json);
    expect((await decodeBody(bytes, {}, 1000)).utf8).toBe(bytes);
    expect((await decodeBody(bytes, { 'content-type': 'application/json; charset=utf-8' }, 1000)).utf8).toBe(bytes);
    // A lone continuation byte, and a surrogate encoded as UTF-8: no text would give these bytes back.
    for (const bad of [
      [0x22, 0x80, 0x22],
      [0x22, 0xed, 0xa0, 0x80, 0x22],
    ]) {
      expect(await codeOf(() => decodeBody(Buffer.from(bad), {}, 1000))).toBe('SVC-SYS-9002');
    }
  });

  it('removes a UTF-8 byte order mark', async () => {
    const decoded = await decodeBody(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(json)]), {}, 1000);
    expect(decoded.text).toBe(json);
    expect(decoded.changed).toBe(true);
  });

  it('reads UTF-16 by its byte order mark or its charset, and Latin-1 by its charset', async () => {
    const le = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(json, 'utf16le')]);
    expect((await decodeBody(le, {}, 1000)).text).toBe(json);
    const declared = { 'content-type': 'application/json; charset="UTF-16LE"' };
    expect((await decodeBody(Buffer.from(json, 'utf16le'), declared, 1000)).text).toBe(json);
    const latin1 = { 'content-type': 'application/json;charset=iso-8859-1' };
    expect((await decodeBody(Buffer.from(json, 'latin1'), latin1, 1000)).utf8.toString()).toBe(json);
  });

  it('undoes gzip, deflate, br and stacked codings, last applied first', async () => {
    const raw = Buffer.from(json);
    expect((await decodeBody(gzipSync(raw), { 'content-encoding': 'gzip' }, 1000)).text).toBe(json);
    expect((await decodeBody(deflateSync(raw), { 'content-encoding': 'deflate' }, 1000)).text).toBe(json);
    expect((await decodeBody(brotliCompressSync(raw), { 'content-encoding': 'BR' }, 1000)).text).toBe(json);
    const stacked = brotliCompressSync(gzipSync(raw));
    expect((await decodeBody(stacked, { 'content-encoding': 'gzip, identity, br' }, 1000)).text).toBe(json);
  });

  it.each([
    ['an unknown coding', Buffer.from(json), { 'content-encoding': 'zz' }],
    ['corrupt gzip', Buffer.from('not gzip'), { 'content-encoding': 'gzip' }],
    ['raw deflate under deflate', deflateRawSync(Buffer.from(json)), { 'content-encoding': 'deflate' }],
    ['four stacked codings', Buffer.from(json), { 'content-encoding': 'gzip,gzip,gzip,gzip' }],
    ['an unknown charset', Buffer.from(json), { 'content-type': 'application/json; charset=utf-32' }],
    ['bytes invalid in UTF-8', Buffer.from([0x7b, 0xff, 0x7d]), {}],
    [
      'a BOM that contradicts the charset',
      Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(json)]),
      { 'content-type': 'application/json; charset=utf-16le' },
    ],
  ])('refuses %s with SVC-SYS-9002', async (_label, bytes, headers) => {
    expect(await codeOf(() => decodeBody(bytes, headers, 1000))).toBe('SVC-SYS-9002');
  });

  it('stops a decompression bomb at the limit with SVC-SYS-9009', async () => {
    const bomb = gzipSync(Buffer.alloc(64 * 1024 * 1024, 0x20));
    expect(bomb.length).toBeLessThan(100_000);
    const before = process.memoryUsage().arrayBuffers;
    expect(await codeOf(() => decodeBody(bomb, { 'content-encoding': 'gzip' }, 1024 * 1024))).toBe('SVC-SYS-9009');
    expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(32 * 1024 * 1024);
    const nested = gzipSync(gzipSync(Buffer.alloc(8 * 1024 * 1024)));
    expect(await codeOf(() => decodeBody(nested, { 'content-encoding': 'gzip, gzip' }, 1024 * 1024))).toBe(
      'SVC-SYS-9009',
    );
  });

  it('describes the decoded body in the forwarded headers', () => {
    const decoded = { text: json, utf8: Buffer.from(json), changed: true };
    expect(
      decodedHeaders(
        { 'content-type': 'application/json; charset=latin1; x=y', 'content-encoding': 'gzip', 'content-length': '9' },
        decoded,
      ),
    ).toEqual({
      'content-type': 'application/json; charset=utf-8; x=y',
      'content-length': String(decoded.utf8.length),
    });
    expect(charsetOf('text/plain')).toBeUndefined();
  });

  it('describes a stream decoded as it flows: no length, no coding, the rest as received', () => {
    const received = {
      'content-type': 'text/event-stream',
      'content-length': '9',
      'content-encoding': 'gzip',
      'x-request-id': ['a', 'b'],
    };
    const headers = streamedHeaders(received);
    expect(headers).toEqual({ 'content-type': 'text/event-stream', 'x-request-id': ['a', 'b'] });
    expect(Object.keys(headers)).toEqual(['content-type', 'x-request-id']);
    expect(received['content-encoding']).toBe('gzip');
  });
});

describe('decompressing', () => {
  it('undoes codings on a stream as it flows', async () => {
    const source = Readable.from([brotliCompressSync(gzipSync(Buffer.from('data: x\n\n')))]);
    const out: Buffer[] = [];
    for await (const chunk of decompressing(source, ['gzip', 'br'])) out.push(chunk as Buffer);
    expect(Buffer.concat(out).toString()).toBe('data: x\n\n');
  });

  it('refuses a coding it cannot undo before reading anything', () => {
    expect(() => decompressing(Readable.from([]), ['compress'])).toThrow(/unsupported content-encoding "compress"/);
  });
});
