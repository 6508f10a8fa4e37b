/**
 * What the collector promoted during each half of each drain of `test/bench/event-processor.ts`:
 * reads that bench's output under `--trace-gc --trace-gc-nvp` on stdin and prints, per half, the
 * scavenges, the bytes they promoted to the old generation (in all and per scavenge), the
 * mark-compacts and the collector's pauses. Prints figures; not a test.
 *
 *   node --trace-gc --trace-gc-nvp test/bench/event-processor.ts 30000 50 | node test/bench/gc-promoted.ts
 */
import { text } from 'node:stream/consumers';

interface Half {
  scavenges: number;
  promoted: number;
  markCompacts: number;
  pauseMs: number;
}

const halves: { label: string; half: Half }[] = [];
let current: Half | undefined;
const open = (label: string): void => {
  current = { scavenges: 0, promoted: 0, markCompacts: 0, pauseMs: 0 };
  halves.push({ label, half: current });
};
let drain = '';
for (const line of (await text(process.stdin)).split('\n')) {
  if (line.startsWith('drain: starts, ')) open(`${(drain = line.slice('drain: starts, '.length))}, first half`);
  else if (line === 'drain: second half') open(`${drain}, second half`);
  else if (line === 'drain: ends') current = undefined;
  else if (current !== undefined && line.includes(' gc=')) {
    const fields = new Map(
      line
        .trim()
        .split(/\s+/)
        .map((pair) => pair.split('=') as [string, string]),
    );
    current.pauseMs += Number(fields.get('pause') ?? 0);
    if (fields.get('gc') === 's') {
      current.scavenges += 1;
      current.promoted += Number(fields.get('promoted') ?? 0);
    } else current.markCompacts += 1;
  }
}
for (const { label, half } of halves) {
  const mb = half.promoted / 1e6;
  console.log(
    `${label}: ${half.scavenges} scavenges promoted ${mb.toFixed(1)} MB (${(mb / Math.max(1, half.scavenges)).toFixed(2)} MB each), ${half.markCompacts} mark-compacts, ${half.pauseMs.toFixed(0)} ms of pauses`,
  );
}
