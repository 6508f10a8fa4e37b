import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DESCRIPTOR_SET_FILE, GOOGLEAPIS_ROOT, STANDARD_PROTO_ROOT } from './contracts.ts';

/**
 * Compiles the descriptor set server reflection serves (`contracts.binpb`): every contract of
 * proto/ with its imports, the health service, and google.rpc's Status and error details, as buf
 * compiles them. @grpc/proto-loader's own
 * descriptors are one synthetic file per package that strict reflection clients (grpcurl,
 * buf curl) cannot link, hence a compiled set. `npm run descriptors` writes it; with `--check`
 * it only says whether the committed one is current (test/proto/descriptor-set.test.ts).
 */
const REPO = fileURLToPath(new URL('../../', import.meta.url));
const BUF = join(REPO, 'node_modules', '.bin', 'buf');

export function compileDescriptorSet(env: NodeJS.ProcessEnv = process.env): Buffer {
  const scratch = mkdtempSync(join(tmpdir(), 'descriptors-'));
  try {
    // google.rpc.Status and its details, so that reflection clients decode the error details.
    const rpc = join(scratch, 'rpc');
    mkdirSync(join(rpc, 'google', 'rpc'), { recursive: true });
    for (const file of ['status.proto', 'error_details.proto'])
      cpSync(join(GOOGLEAPIS_ROOT, 'google', 'rpc', file), join(rpc, 'google', 'rpc', file));
    const parts = [
      ['proto', join(scratch, 'contracts.binpb')],
      [STANDARD_PROTO_ROOT, join(scratch, 'standard.binpb')],
      [rpc, join(scratch, 'rpc.binpb')],
    ].map(([input, output]) => {
      const run = spawnSync(BUF, ['build', input as string, '--as-file-descriptor-set', '-o', output as string], {
        cwd: REPO,
        encoding: 'utf8',
        timeout: 60_000,
        env,
      });
      if (run.status !== 0) throw new Error(`buf build ${String(input)} failed: ${run.stderr}`);
      return readFileSync(output as string);
    });
    // Two FileDescriptorSets concatenated are one set: its only field is the repeated `file`.
    return Buffer.concat(parts);
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const compiled = compileDescriptorSet();
  if (process.argv.includes('--check')) {
    const current = readFileSync(DESCRIPTOR_SET_FILE).equals(compiled);
    process.stdout.write(current ? 'descriptor set is current\n' : 'descriptor set is stale: npm run descriptors\n');
    process.exitCode = current ? 0 : 1;
  } else {
    writeFileSync(DESCRIPTOR_SET_FILE, compiled);
  }
}
