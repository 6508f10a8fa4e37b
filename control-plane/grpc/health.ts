import { status, type ServerUnaryCall, type ServerWritableStream, type sendUnaryData } from '@grpc/grpc-js';
import type { UntypedServiceImplementation } from '@grpc/grpc-js';
import type { Logger } from 'pino';

/** Whether the process can serve: its store and its bus answer. */
export type HealthProbe = () => Promise<boolean>;

type ServingStatus = 'SERVING' | 'NOT_SERVING' | 'SERVICE_UNKNOWN';
interface HealthCheckRequest {
  service: string;
}

/** How often the watchers are told of a change. */
const WATCH_INTERVAL_MS = 5_000;
/**
 * How long one probe's answer serves every Check and Watch: the store is asked at most this often,
 * whatever the number of callers, so that callers without a credential cannot crowd out the
 * store's own connections.
 */
const PROBE_REUSE_MS = 1_000;
/** Watch streams open at once; one more is refused with RESOURCE_EXHAUSTED. */
export const MAX_HEALTH_WATCHERS = 1_000;

interface Watcher {
  readonly call: ServerWritableStream<HealthCheckRequest, object>;
  last: ServingStatus | undefined;
}

/**
 * grpc.health.v1.Health: SERVING while the store and the bus answer, NOT_SERVING otherwise, for
 * the server as a whole (service "") and for each of its services. It asks for no credential, so
 * that load balancers and Kubernetes gRPC probes can call it, and says nothing but the status.
 * Its cost is fixed: one probe a second at most, and one timer for every watcher together.
 */
export function healthService(
  probe: HealthProbe,
  logger: Logger,
  known: ReadonlySet<string> = new Set(),
): UntypedServiceImplementation {
  let recent: { at: number; serving: Promise<boolean> } | undefined;
  const probed = (): Promise<boolean> => {
    const now = Date.now();
    if (recent === undefined || now - recent.at >= PROBE_REUSE_MS) {
      recent = {
        at: now,
        serving: probe().catch((error: unknown) => {
          logger.warn({ err: error }, 'health probe failed');
          return false;
        }),
      };
    }
    return recent.serving;
  };
  const statusOf = async (service: string): Promise<ServingStatus> => {
    if (service !== '' && known.size > 0 && !known.has(service)) return 'SERVICE_UNKNOWN';
    return (await probed()) ? 'SERVING' : 'NOT_SERVING';
  };

  const watchers = new Set<Watcher>();
  let ticker: NodeJS.Timeout | undefined;
  const tell = async (watcher: Watcher) => {
    const serving = await statusOf(watcher.call.request.service);
    if (watcher.call.cancelled || !watchers.has(watcher) || serving === watcher.last) return;
    watcher.last = serving;
    watcher.call.write({ status: serving });
  };
  const tick = () => {
    for (const watcher of watchers) void tell(watcher);
  };

  return {
    Check(call: ServerUnaryCall<HealthCheckRequest, object>, callback: sendUnaryData<object>) {
      void statusOf(call.request.service).then((serving) => {
        if (serving === 'SERVICE_UNKNOWN')
          callback({ code: status.NOT_FOUND, details: `unknown service ${call.request.service}` });
        else callback(null, { status: serving });
      });
    },
    Watch(call: ServerWritableStream<HealthCheckRequest, object>) {
      if (watchers.size >= MAX_HEALTH_WATCHERS) {
        call.emit('error', {
          code: status.RESOURCE_EXHAUSTED,
          details: `at most ${MAX_HEALTH_WATCHERS} health watches at once`,
        });
        return;
      }
      const watcher: Watcher = { call, last: undefined };
      watchers.add(watcher);
      if (ticker === undefined) {
        ticker = setInterval(tick, WATCH_INTERVAL_MS);
        ticker.unref();
      }
      call.on('cancelled', () => {
        watchers.delete(watcher);
        if (watchers.size === 0) {
          clearInterval(ticker);
          ticker = undefined;
        }
      });
      void tell(watcher);
    },
  };
}
