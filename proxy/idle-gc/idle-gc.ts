import { Counter, Histogram, type Registry } from 'prom-client';

export interface IdleGcDeps {
  /** `globalThis.gc`; without it (a process started without --expose-gc) nothing is collected. */
  gc: NodeJS.GCFunction | undefined;
  /** Quiet time after the last governed request before the collection; 0 turns it off. */
  idleMs: number;
  registry: Registry;
  logger: { info(fields: object, message: string): void; warn(fields: object, message: string): void };
}

/**
 * Gives the memory a burst of calls left behind back to the system once the proxy is idle. V8
 * keeps its heap at the size the load grew it to and returns those pages only through its memory
 * reducer, which after a busy spell waits for its watchdog, about 100 s (docs/performance.md,
 * "Memory over many calls"). A collection that shrinks the heap (V8's last-resort flavor) returns
 * them at once, but holds the event loop for up to about 100 ms; so it runs once per idle spell,
 * `idleMs` after the start or after the last request ended, and never while one is in flight,
 * counting the rest of an answer still read after its client left (to bill it). Bytes through
 * blind CONNECT tunnels are not counted: they wait out the pause in the sockets' buffers.
 */
export class IdleGc {
  readonly #deps: IdleGcDeps;
  /** The collector when idle collection is on (exposed, and a quiet time above 0). */
  readonly #gc: NodeJS.GCFunction | undefined;
  readonly #collections: Counter;
  readonly #pause: Histogram;
  #inflight = 0;
  #timer: NodeJS.Timeout | undefined;

  constructor(deps: IdleGcDeps) {
    this.#deps = deps;
    this.#gc = deps.idleMs > 0 ? deps.gc : undefined;
    this.#collections = new Counter({
      name: 'svc_proxy_idle_gc_total',
      help: 'Heap-shrinking collections run after the proxy went idle',
      registers: [deps.registry],
    });
    this.#pause = new Histogram({
      name: 'svc_proxy_idle_gc_seconds',
      help: 'Time the event loop was held by each idle collection',
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
      registers: [deps.registry],
    });
    if (deps.idleMs > 0 && deps.gc === undefined)
      deps.logger.info({ proxy_idle_gc_ms: deps.idleMs }, 'node runs without --expose-gc; no idle collection');
    // The start is an idle spell too: loading the modules leaves the young generation grown (about
    // 10 MB resident at ready), and only a collection of this flavor shrinks it again.
    this.#arm();
  }

  /** Counts a request in flight until the function it returns is called (once; later calls do nothing). */
  begin(): () => void {
    this.#inflight++;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      if (--this.#inflight === 0) this.#arm();
    };
  }

  close(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  /** Armed at the start and as the last request in flight ends: once per idle spell. */
  #arm(): void {
    if (this.#gc === undefined) return;
    // An idle proxy may exit; the collection does not keep it alive.
    this.#timer = setTimeout(() => this.#collect(), this.#deps.idleMs).unref();
  }

  #collect(): void {
    this.#timer = undefined;
    const gc = this.#gc;
    if (gc === undefined || this.#inflight > 0) return;
    const started = performance.now();
    try {
      gc({ type: 'major', flavor: 'last-resort' });
    } catch (error) {
      // Memory not given back is no reason to stop serving.
      this.#deps.logger.warn({ err: error }, 'idle collection failed');
      return;
    }
    this.#pause.observe((performance.now() - started) / 1000);
    this.#collections.inc();
  }
}
