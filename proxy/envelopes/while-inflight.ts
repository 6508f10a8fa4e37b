import type { LocalEnvelope } from './envelope-registry.ts';

/**
 * Runs `wait` counted among the envelope's calls in flight, with a signal that aborts when the
 * envelope ends meanwhile (and that keeps the envelope from being forgotten while it waits).
 */
export async function whileInflight<T>(envelope: LocalEnvelope, wait: (ended: AbortSignal) => Promise<T>): Promise<T> {
  const envelopeEnded = new AbortController();
  const cutter = (): void => envelopeEnded.abort();
  envelope.inflight.add(cutter);
  try {
    return await wait(envelopeEnded.signal);
  } finally {
    envelope.inflight.delete(cutter);
  }
}
