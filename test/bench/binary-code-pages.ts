/**
 * Which code of the `node` binary a process holds resident, by kind: the pages of the binary's
 * executable mappings present in memory (`/proc/<pid>/pagemap`), each shared among the symbols
 * it holds (`nm -n -C`, the binary's symbol table) and summed by what the symbols' names say they
 * are (V8's optimizing compilers, its heap, Node, OpenSSL, ...). Where `nm` or the page map cannot
 * be read, it gives nothing.
 */
import { execFileSync } from 'node:child_process';
import { closeSync, openSync, readFileSync, readlinkSync, readSync } from 'node:fs';

const PAGE = 4096;

/** The first kind whose pattern a symbol's name meets; the rest is `other`. */
const KINDS: [string, RegExp][] = [
  ['TurboFan', /v8::internal::(compiler|turboshaft)::/],
  ['Maglev', /v8::internal::maglev::/],
  ['WebAssembly', /v8::internal::wasm::/],
  ['V8 regexp', /v8::internal::(RegExp|regexp|Irregexp)/],
  ['V8 parser', /v8::internal::(Parser|ParserBase|Scanner|PreParser|AstValueFactory|Scope|DeclarationScope)/],
  [
    'V8 heap',
    /v8::internal::(Heap|Mark|Scaveng|\w*Collector|Sweeper|Evacuat|\w*Marking|MemoryAllocator|PagedSpace|NewSpace)/,
  ],
  ['V8 interpreter', /v8::internal::(interpreter|baseline)::/],
  ['V8, the rest', /v8::/],
  ['Node', /node::/],
  ['ICU', /icu_\d+::/],
  [
    'OpenSSL',
    /^(EVP|X509|SSL|BN|EC|RSA|ASN1|CRYPTO|OPENSSL|OSSL|ossl|PEM|BIO|OBJ|SHA|AES|DH|DSA|HMAC|RAND|ERR|tls|dtls|d2i|i2d|CONF|PKCS|ec_|bn_|rsa_|x509|ChaCha|Poly)/,
  ],
  ['libuv', /^uv_/],
  ['HTTP parsers, compression, DNS, URL', /nghttp2|llhttp|deflate|inflate|Brotli|ares_|ada::|simdjson|simdutf|ZSTD/],
  ['C++ library', /^std::|^__cxx|^operator /],
];

interface SymbolTable {
  addresses: number[];
  kinds: string[];
}

function symbolsOf(binary: string): SymbolTable | null {
  let listing: string;
  try {
    listing = execFileSync('nm', ['-n', '-C', '--defined-only', binary], {
      encoding: 'utf8',
      maxBuffer: 1 << 30,
      stdio: ['ignore', 'pipe', 'ignore'],
    });
  } catch {
    return null;
  }
  const table: SymbolTable = { addresses: [], kinds: [] };
  for (const line of listing.split('\n')) {
    const first = line.indexOf(' ');
    const type = line[first + 1];
    if (type !== 't' && type !== 'T' && type !== 'W' && type !== 'w') continue;
    const name = line.slice(first + 3);
    table.addresses.push(Number.parseInt(line.slice(0, first), 16));
    table.kinds.push(KINDS.find(([, pattern]) => pattern.test(name))?.[0] ?? 'other');
  }
  return table;
}

/** Index of the last symbol at or before `address` (-1 if none). */
function symbolAt(addresses: readonly number[], address: number): number {
  let lo = 0;
  let hi = addresses.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((addresses[mid] as number) <= address) lo = mid + 1;
    else hi = mid;
  }
  return lo - 1;
}

/** Resident bytes of the binary's code by kind, largest first; empty where it cannot be read. */
export function binaryCodePages(pid: number): [string, number][] {
  const binary = readlinkSync(`/proc/${pid}/exe`);
  const table = symbolsOf(binary);
  if (table === null) return [];
  const ranges = readFileSync(`/proc/${pid}/maps`, 'utf8')
    .split('\n')
    .map((line) => line.split(/\s+/))
    .filter((fields) => fields[5] === binary && fields[1]?.includes('x') === true)
    .map((fields) => (fields[0] as string).split('-').map((hex) => Number.parseInt(hex, 16)) as [number, number]);
  const totals = new Map<string, number>();
  let pagemap: number;
  try {
    pagemap = openSync(`/proc/${pid}/pagemap`, 'r');
  } catch {
    return [];
  }
  try {
    for (const [lo, hi] of ranges) {
      const pages = (hi - lo) / PAGE;
      const entries = Buffer.alloc(pages * 8);
      readSync(pagemap, entries, 0, entries.length, (lo / PAGE) * 8);
      for (let i = 0; i < pages; i++) {
        if (entries.readBigUInt64LE(i * 8) >> 63n === 0n) continue;
        const start = lo + i * PAGE;
        const first = Math.max(symbolAt(table.addresses, start), 0);
        const last = Math.max(symbolAt(table.addresses, start + PAGE - 1), first);
        const share = PAGE / (last - first + 1);
        for (let s = first; s <= last; s++) {
          const kind = table.kinds[s] as string;
          totals.set(kind, (totals.get(kind) ?? 0) + share);
        }
      }
    }
  } finally {
    closeSync(pagemap);
  }
  return [...totals].sort((a, b) => b[1] - a[1]);
}
