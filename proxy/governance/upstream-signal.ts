export interface UpstreamSignal {
  readonly signal: AbortSignal;
  /** Call when the call is over: clears the drain timer. */
  dispose(): void;
}

/**
 * The signal of a governed upstream request. It does not end with the client: a client that
 * goes away leaves the request running for at most `drainMs` more, so the answer can still be
 * read and billed at its real usage (the provider bills it whether or not anyone listens);
 * after that the request is aborted and the call is charged at its worst case.
 */
export function upstreamSignal(client: AbortSignal, drainMs: number): UpstreamSignal {
  const upstream = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const onClientGone = () => {
    timer = setTimeout(
      () => upstream.abort(new Error(`client gone; answer not complete within ${drainMs} ms`)),
      drainMs,
    );
    // A pending drain must not hold a shutting-down process open.
    timer.unref();
  };
  if (client.aborted) onClientGone();
  else client.addEventListener('abort', onClientGone, { once: true });
  return {
    signal: upstream.signal,
    dispose() {
      clearTimeout(timer);
      client.removeEventListener('abort', onClientGone);
    },
  };
}
