import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { SvcError } from '../../core/errors/index.ts';

export interface CaFileOptions {
  certFile: string;
  keyFile: string;
  /** Standalone mode only: in a cluster the CA comes from a mounted Secret and must exist. */
  allowGenerate: boolean;
}

export interface LoadedCa {
  certFile: string;
  keyFile: string;
  certPem: string;
  keyPem: string;
  /** True when this call generated the CA and wrote both files. */
  generated: boolean;
}

async function readIfPresent(file: string): Promise<string | undefined> {
  try {
    return await readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new SvcError('SVC-SYS-9001', `cannot read proxy CA file ${file}: ${(error as Error).message}`, { file });
  }
}

/** Loads the proxy CA from PEM files, generating and writing it first when allowed and absent. */
export async function loadOrCreateCa(options: CaFileOptions): Promise<LoadedCa> {
  const { certFile, keyFile, allowGenerate } = options;
  const [certPem, keyPem] = await Promise.all([readIfPresent(certFile), readIfPresent(keyFile)]);
  if (certPem !== undefined && keyPem !== undefined) {
    return { certFile, keyFile, certPem, keyPem, generated: false };
  }
  const missing = certPem === undefined ? certFile : keyFile;
  if (!allowGenerate || certPem !== undefined || keyPem !== undefined) {
    // Half a CA is never regenerated: a new key would orphan the certificate agents already trust.
    throw new SvcError('SVC-SYS-9001', `proxy CA file missing: ${missing}`, { file: missing });
  }
  // Only a standalone first start generates a CA: the certificate library is loaded for it alone.
  const { generateCa } = await import('./ca-generate.ts');
  const ca = await generateCa();
  await writeNew(keyFile, ca.keyPem, 0o600);
  await writeNew(certFile, ca.certPem, 0o644);
  return { certFile, keyFile, ...ca, generated: true };
}

/** Writes a file that must not exist yet, so two processes starting at once never mix two CAs. */
async function writeNew(file: string, content: string, mode: number): Promise<void> {
  try {
    await mkdir(dirname(file), { recursive: true });
    await writeFile(file, content, { mode, flag: 'wx' });
  } catch (error) {
    throw new SvcError('SVC-SYS-9001', `cannot write proxy CA file ${file}: ${(error as Error).message}`, { file });
  }
}
