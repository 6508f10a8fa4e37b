import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { compileDescriptorSet } from '../../control-plane/grpc/build-descriptor-set.ts';
import { DESCRIPTOR_SET_FILE, servedFileDescriptors } from '../../control-plane/grpc/contracts.ts';
import { readFileSync } from 'node:fs';

const scratch = mkdtempSync(join(tmpdir(), 'descriptor-set-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('the descriptor set server reflection serves', () => {
  it('is what buf compiles from proto/ and the health service today (offline): npm run descriptors', () => {
    const compiled = compileDescriptorSet({
      PATH: process.env.PATH,
      HOME: scratch,
      BUF_CACHE_DIR: mkdtempSync(join(scratch, 'cache-')),
      HTTPS_PROXY: 'http://127.0.0.1:9',
      HTTP_PROXY: 'http://127.0.0.1:9',
    });
    expect(
      readFileSync(DESCRIPTOR_SET_FILE).equals(compiled),
      'contracts.binpb is stale: run npm run descriptors',
    ).toBe(true);
  });

  it('holds every contract file under its own name, with the files it imports', () => {
    const names = servedFileDescriptors().map((file) => {
      // Field 1 (name) is written first by buf.
      const length = file[1] ?? 0;
      return file.subarray(2, 2 + length).toString('utf8');
    });
    expect(names).toEqual(
      expect.arrayContaining([
        'svc/policy/v1/policy.proto',
        'svc/cost/v1/cost.proto',
        'svc/envelope/v1/envelope.proto',
        'svc/checkpoint/v1/checkpoint.proto',
        'svc/tenant/v1/tenant.proto',
        'grpc/health/v1/health.proto',
        'google/api/annotations.proto',
        'google/protobuf/timestamp.proto',
        'google/rpc/error_details.proto',
      ]),
    );
  });
});
