import type { IncomingHttpHeaders } from 'node:http';
import { isSvcError, type SvcError } from '../../core/errors/index.ts';
import type { LocalEnvelope } from '../envelopes/index.ts';
import type { GovernanceDeps } from './governance-deps.ts';

/**
 * The envelope a request runs under, its opening recorded when this request opened it; or, as a
 * value, the error that refuses it (a budget this sidecar may not charge, a new envelope of a
 * terminated sidecar), which each caller answers in its own format before anything goes upstream.
 */
export function envelopeFor(deps: GovernanceDeps, headers: IncomingHttpHeaders): LocalEnvelope | SvcError {
  try {
    const { envelope, opened } = deps.envelopes.resolve(headers);
    if (opened) void deps.recorder.opened(envelope);
    return envelope;
  } catch (error) {
    if (!isSvcError(error)) throw error;
    return error;
  }
}
