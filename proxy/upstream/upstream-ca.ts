import { readFile } from 'node:fs/promises';
import { rootCertificates } from 'node:tls';
import { SvcError } from '../../core/errors/index.ts';

/**
 * The CAs trusted for upstream TLS: the system roots plus, when given, the PEM in `extraCaFile`
 * (SVC_UPSTREAM_CA_FILE), e.g. a corporate egress CA or a local simulator's certificate.
 */
export async function upstreamTrust(extraCaFile?: string): Promise<string[]> {
  if (extraCaFile === undefined) return [...rootCertificates];
  try {
    return [...rootCertificates, await readFile(extraCaFile, 'utf8')];
  } catch (error) {
    throw new SvcError('SVC-SYS-9001', `cannot read upstream CA file ${extraCaFile}: ${(error as Error).message}`, {
      file: extraCaFile,
    });
  }
}
