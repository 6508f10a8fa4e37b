/**
 * The V8 flags the sidecar runs with, and standalone mode, which serves agents with the same
 * proxy. The chart's injected sidecar, the image's documented command and its default
 * (standalone) one, `npm run proxy` and `npm start` carry them as text
 * (`test/build/node-flags.test.ts` holds those copies to this list); the benchmarks and the
 * compiled-build test start the proxy with them.
 *
 * - A young generation of 16 MB per semi-space, fixed: V8 sizes it from the machine's memory
 *   (up to 64 MB here), so the same sidecar would idle larger on larger nodes; and with a smaller
 *   one (2 MB) a scavenge runs every few milliseconds under load, so the state of the calls in
 *   flight survives two of them and is promoted to the old generation as garbage to be.
 * - The old generation grows to twice its live size between full collections, not up to four
 *   times as V8's own heuristic lets it under a high allocation rate: the memory a burst of
 *   calls leaves behind stays near what is live (docs/performance.md, "Memory over many calls").
 * - `gc` exposed, so that once the proxy is idle one collection gives that memory back to the
 *   system (`proxy/idle-gc/`, `proxy_idle_gc_ms`).
 * - No inspector on `SIGUSR1`: Node would otherwise open one on 127.0.0.1:9229, in the network
 *   the pod's containers share, for any process that may signal the proxy; the signal now ends
 *   it instead, and the kubelet starts it again.
 */
export const SIDECAR_NODE_FLAGS = [
  '--max-semi-space-size=16',
  '--heap-growing-percent=100',
  '--expose-gc',
  '--disable-sigusr1',
] as const;

/**
 * The environment the sidecar runs with beside those flags (the chart's injected sidecar and the
 * image set it; `test/build/node-flags.test.ts` holds them to this list). glibc's malloc gives
 * each thread that allocates an arena of its own, up to eight per core: the proxy's threads
 * (libuv's pool writing LMDB, V8's helpers, the token thread) each keep one, with its free pages
 * held. Two arenas hold the same work in about 3 MB less at idle and 5 to 30 MB less under load,
 * with no more CPU per call (docs/performance.md, "Two malloc arenas"). Read by glibc when the
 * process starts, so it cannot be set from inside it.
 */
export const SIDECAR_ENV = { MALLOC_ARENA_MAX: '2' } as const;
