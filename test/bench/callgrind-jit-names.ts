/**
 * Names the JIT's functions in a callgrind dump of `test/bench/proxy-instructions.ts`: callgrind
 * shows V8's generated code as bare addresses (`fn=(12) 0x000000002a3b4c00`), and V8 run with
 * `--perf-basic-prof` writes where each function's code lies (`/tmp/perf-<pid>.map`, lines of
 * start, size and name in hex). Each address inside a function's code is given that function's
 * name (the last code written at that start, as V8 may reuse it), so that `callgrind_annotate`
 * adds up a function's cost, self and inclusive. Writes the renamed dump; not a test.
 *
 *   node test/bench/callgrind-jit-names.ts /tmp/proxy-calls.<pid>.1 /tmp/perf-<pid>.map > named.1
 *   callgrind_annotate --inclusive=yes named.1
 */
import { readFileSync } from 'node:fs';

const [dumpFile, mapFile] = process.argv.slice(2);
if (dumpFile === undefined || mapFile === undefined) {
  throw new Error('usage: callgrind-jit-names.ts <callgrind dump> <perf map>');
}

const code = new Map<number, { end: number; name: string }>();
for (const line of readFileSync(mapFile, 'utf8').split('\n')) {
  const [start, size, ...name] = line.split(' ');
  if (start === undefined || size === undefined || name.length === 0) continue;
  const from = Number.parseInt(start, 16);
  code.set(from, { end: from + Number.parseInt(size, 16), name: name.join(' ') });
}
const starts = [...code.keys()].sort((a, b) => a - b);

/** The function whose code holds `address`, by binary search over the code's starts. */
function nameAt(address: number): string | undefined {
  let low = 0;
  let high = starts.length - 1;
  let found = -1;
  while (low <= high) {
    const middle = (low + high) >> 1;
    if (starts[middle]! <= address) {
      found = middle;
      low = middle + 1;
    } else high = middle - 1;
  }
  if (found < 0) return undefined;
  const range = code.get(starts[found]!)!;
  return address < range.end ? `JS ${range.name}` : undefined;
}

const UNNAMED = /^(c?fn=\(\d+\)) 0x([0-9a-f]+)$/;
const out = readFileSync(dumpFile, 'utf8')
  .split('\n')
  .map((line) => {
    const match = UNNAMED.exec(line);
    const name = match === null ? undefined : nameAt(Number.parseInt(match[2]!, 16));
    return name === undefined ? line : `${match![1]} ${name}`;
  });
process.stdout.write(out.join('\n'));
