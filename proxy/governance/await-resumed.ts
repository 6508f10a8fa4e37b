import { whileInflight, type LocalEnvelope } from '../envelopes/index.ts';
import type { PauseRefusal } from '../holds/index.ts';
import type { ProxiedRequest } from '../listener/index.ts';
import type { GovernanceDeps } from './governance-deps.ts';

/** Why a call of the envelope is refused once it ended, or null while it runs. */
export function endedRefusal(envelope: LocalEnvelope): PauseRefusal | null {
  return envelope.ending === null
    ? null
    : {
        code: 'SVC-ENV-1003',
        message: `envelope ${envelope.envelopeId} already ended (${envelope.ending.status}): ${envelope.ending.reason}`,
      };
}

/**
 * Holds a call of a paused envelope, or of any envelope while the sidecar is paused, until it
 * runs again, before anything is reserved or sent upstream, as a model call is held: null when
 * it may go on, else why it is refused (its envelope ended meanwhile, not resumed in time, over
 * the bounds on held calls and bytes, the proxy shutting down). `bytes`: what holding it keeps.
 */
export async function awaitResumed(
  deps: Pick<GovernanceDeps, 'pauses'>,
  req: ProxiedRequest,
  envelope: LocalEnvelope,
  bytes: number,
): Promise<PauseRefusal | null> {
  if (!deps.pauses.holds(envelope)) return null;
  const held = await whileInflight(envelope, (signal) =>
    deps.pauses.await(envelope, bytes, AbortSignal.any([req.signal, signal])),
  );
  return endedRefusal(envelope) ?? held;
}
