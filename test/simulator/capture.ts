import type { StreamMeter, StreamProgress } from '../../proxy/providers/adapter.ts';
import type { Simulator } from './server.ts';

/** The raw bytes the simulator answers to one request, exactly as they came off the socket. */
export async function captureRaw(
  sim: Simulator,
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<Uint8Array> {
  const res = await fetch(sim.url + path, {
    method: 'POST',
    body: JSON.stringify(body),
    headers: { 'content-type': 'application/json', ...headers },
  });
  return new Uint8Array(await res.arrayBuffer());
}

/** Splits bytes at pseudo-random offsets (seeded, so a failure reproduces), often inside events and characters. */
export function splitAt(bytes: Uint8Array, seed: number, maxPiece = 17): Uint8Array[] {
  let state = seed >>> 0 || 1;
  const next = () => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) / 0x1_0000_0000;
  };
  const pieces: Uint8Array[] = [];
  for (let i = 0; i < bytes.length;) {
    const len = 1 + Math.floor(next() * maxPiece);
    pieces.push(bytes.subarray(i, i + len));
    i += len;
  }
  return pieces;
}

export interface MeterRun {
  last: StreamProgress;
  forwarded: Uint8Array;
  progress: StreamProgress[];
}

/** Feeds chunks to a meter as a proxy would, collecting what it lets through. */
export async function runMeter(meter: StreamMeter, chunks: readonly Uint8Array[]): Promise<MeterRun> {
  const out: Uint8Array[] = [];
  const progress: StreamProgress[] = [];
  for (const chunk of chunks) {
    for (const p of meter.push(chunk)) {
      progress.push({ ...p, usage: { ...p.usage }, toolCalls: [...p.toolCalls] });
      out.push(p.forward);
    }
  }
  const last = await meter.end();
  out.push(last.forward);
  return {
    last: { ...last, usage: { ...last.usage }, toolCalls: [...last.toolCalls] },
    forwarded: new Uint8Array(Buffer.concat(out)),
    progress,
  };
}

/** Feeds one chunk to a meter, returning the bytes it lets through and the last progress. */
export function pushChunk(
  meter: StreamMeter,
  chunk: Uint8Array,
): { forward: Uint8Array; last: StreamProgress | undefined } {
  const out: Uint8Array[] = [];
  let last: StreamProgress | undefined;
  for (const p of meter.push(chunk)) {
    out.push(p.forward);
    last = p;
  }
  return { forward: new Uint8Array(Buffer.concat(out)), last };
}
