import { parseArgs } from 'node:util';
import { loadConfig } from '../../core/config/load.ts';
import { isSvcError, SvcError } from '../../core/errors/index.ts';
import { createLogger } from '../../core/observability/logger.ts';
import { createScrubber } from '../../core/observability/redact.ts';
import { openStorage } from '../storage/open-storage.ts';
import type { Storage } from '../storage/storage.ts';
import { copyStore } from './copy-store.ts';

const USAGE = 'usage: svc migrate-store --from lmdb:<data dir> --to postgres://user:password@host:5432/db';

/** `lmdb:<dir>` (the SVC_DATA_DIR whose `control-plane/` store is meant) or a PostgreSQL URL. */
function locationOf(flag: '--from' | '--to', value: string | undefined): { data_dir: string; database_url?: string } {
  if (value?.startsWith('lmdb:') === true && value.length > 'lmdb:'.length) return { data_dir: value.slice(5) };
  if (value !== undefined && /^postgres(ql)?:\/\//.test(value)) return { data_dir: '.', database_url: value };
  throw new SvcError(
    'SVC-SYS-9002',
    `invalid request: ${flag}: must be lmdb:<data dir> or postgres://…\n${USAGE}`,
    {},
    [{ field: flag, description: 'must be lmdb:<data dir> or a postgres:// URL' }],
  );
}

/**
 * `svc migrate-store`: copies the control plane's store into a new, empty one (docs/deployment.md),
 * with the control plane stopped. Prints what it copied as one JSON line.
 */
async function main(values: { from?: string | undefined; to?: string | undefined }): Promise<void> {
  const from = locationOf('--from', values.from);
  const to = locationOf('--to', values.to);
  const logger = createLogger({ level: 'info', service: 'migrate-store', secrets });
  const open = (location: typeof from) => openStorage(loadConfig({}, { ...location, log_level: 'info' }), logger);
  const source = await open(from);
  let target: Storage | undefined;
  try {
    target = await open(to);
    const report = await copyStore(source, target, (line) => logger.info(line));
    process.stdout.write(`${JSON.stringify({ migrated: report })}\n`);
  } finally {
    await target?.close();
    await source.close();
  }
}

const { values } = parseArgs({ options: { from: { type: 'string' }, to: { type: 'string' } }, strict: false });
// The URLs hold passwords: they never reach a log line or the error printed.
const secrets = [values.from, values.to].filter((v): v is string => typeof v === 'string');
main({ from: values.from as string | undefined, to: values.to as string | undefined }).catch((error: unknown) => {
  const message = error instanceof Error ? error.message : String(error);
  const code = isSvcError(error) ? `${error.code} ` : '';
  process.stderr.write(`migrate-store failed: ${code}${createScrubber(secrets).text(message)}\n`);
  process.exit(1);
});
