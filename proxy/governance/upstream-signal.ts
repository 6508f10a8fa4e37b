export interface UpstreamSignal {
  readonly signal: AbortSignal;
  /**
   * Starts the drain bound: nobody receives the rest of the answer (the proxy cut it), yet it is
   * read on for the provider's usage for at most the drain time. Once is enough.
   */
  drain(): void;
  /** Call when the call is over: clears the drain timer. */
  dispose(): void;
}

/**
 * The signal of a governed upstream request. It does not end with the client, nor with a cut: a
 * client that goes away, or an answer the proxy cut, leaves the request running for at most
 * `drainMs` more, so the answer can still be read and billed at its real usage (the provider
 * bills it whether or not anyone listens); after that the request is aborted and the call is
 * charged at its worst case. `left` is called when the client goes away (at once, if it has):
 * what stands for the call while it is drained.
 */
export function upstreamSignal(client: AbortSignal, drainMs: number, left: () => void): UpstreamSignal {
  const upstream = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const drain = () => {
    if (timer !== undefined) return;
    timer = setTimeout(
      () => upstream.abort(new Error(`answer not complete within ${drainMs} ms of the drain's start`)),
      drainMs,
    );
    // A pending drain must not hold a shutting-down process open.
    timer.unref();
  };
  const leave = () => {
    drain();
    left();
  };
  if (client.aborted) leave();
  else client.addEventListener('abort', leave, { once: true });
  return {
    signal: upstream.signal,
    drain,
    dispose() {
      clearTimeout(timer);
      client.removeEventListener('abort', leave);
    },
  };
}
