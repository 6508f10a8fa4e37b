import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as lmdb from 'lmdb';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { recordKey, StagedView } from '../../control-plane/storage/lmdb/kv.ts';
import { Layout } from '../../control-plane/storage/lmdb/layout.ts';

type Key = Array<string | number>;

/** lmdb's own key encoder (exported at run time, not in its types): the bytes it writes for a key. */
const encoded = (key: Key): Buffer =>
  Buffer.from((lmdb as unknown as { keyValueToBuffer(key: Key): Uint8Array }).keyValueToBuffer(key));

const IDS = [
  '8a3f0c1e-5b7d-4e2a-9c6f-1d2e3f4a5b6c',
  '000000000000042',
  'event_seq',
  'x',
  'a'.repeat(63),
  'a'.repeat(64),
  'a'.repeat(300),
  '~~\u007f',
  ' leading space',
  // Not plain: escaped or UTF-8 by the encoder, left to it.
  '',
  '\u0001x',
  'x\u0003y',
  '\u001bx',
  'é',
  '\u{1F600}',
  '\uD800',
  'a'.repeat(70) + '\u0002',
];

let dir: string;
let root: lmdb.RootDatabase;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'lmdb-keys-'));
  root = lmdb.open({ path: dir, maxDbs: 8, compression: false });
});
afterEach(async () => {
  await root.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("LMDB records' keys", () => {
  it('are byte for byte what the key encoder writes for [...prefix, id]', () => {
    const layout = new Layout(root);
    const spaces = [
      layout.tenant('acme', 'event'),
      layout.tenant('a_b-9', 'meta'),
      layout.nested('acme', 'envelope_event', '8a3f0c1e-5b7d-4e2a-9c6f-1d2e3f4a5b6c'),
      layout.nested('acme', 'checkpoint', 'é\u0001'),
      layout.globalKind('tenant'),
      layout.globalNested('api_key_child', 'k1'),
    ];
    for (const space of spaces) {
      for (const id of [...IDS, 7, 0, 2 ** 40]) {
        const key = recordKey(space, id);
        const bytes = Buffer.isBuffer(key) ? key : encoded(key);
        expect(bytes.equals(encoded([...space.prefix, id])), `${space.name} ${String(id)}`).toBe(true);
      }
    }
    // Plain ids in a plain space skip the encoder.
    expect(Buffer.isBuffer(recordKey(layout.tenant('acme', 'event'), IDS[0]!))).toBe(true);
  });

  it("are a tenant's own in a nested space, whatever record id another tenant nests under", () => {
    const layout = new Layout(root);
    const id = IDS[0]!;
    for (let round = 0; round < 2; round++) {
      for (const tenant of ['acme', 'other']) {
        const space = layout.nested(tenant, 'envelope_event', id);
        expect(space.prefix).toEqual([tenant, 'envelope_event', id]);
        expect(space).toBe(layout.nested(tenant, 'envelope_event', id));
        expect(
          (recordKey(space, '000000000000001') as Buffer).equals(
            encoded([tenant, 'envelope_event', id, '000000000000001']),
          ),
        ).toBe(true);
      }
    }
    expect(layout.nested('acme', 'checkpoint', id).name).not.toBe(layout.nested('acme', 'envelope_event', id).name);
  });

  it('lie on disk as the key encoder wrote them, and read back by their array keys', async () => {
    const layout = new Layout(root);
    const space = layout.tenant('acme', 'event');
    const view = new StagedView();
    for (const [i, id] of IDS.entries()) view.put(space, id, { i });
    await root.transaction(() => view.commit());

    const raw = root.openDB<unknown, Buffer>({ name: 'tenant_data', keyEncoding: 'binary' });
    const stored = [...raw.getKeys()].map((k) => Buffer.from(k).toString('hex')).sort();
    expect(stored).toEqual(IDS.map((id) => encoded(['acme', 'event', id]).toString('hex')).sort());
    for (const [i, id] of IDS.entries()) expect(layout.data.get(['acme', 'event', id])).toEqual({ i });
    const plain = IDS.slice(0, IDS.indexOf(''));
    const read = [...layout.data.getKeys()].map((k) => k.at(-1));
    for (const id of plain) expect(read).toContain(id);
  });
});
