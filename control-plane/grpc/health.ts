import { status, type ServerUnaryCall, type ServerWritableStream, type sendUnaryData } from '@grpc/grpc-js';
import type { UntypedServiceImplementation } from '@grpc/grpc-js';
import type { Logger } from 'pino';

/** Whether the process can serve: its store and its bus answer. */
export type HealthProbe = () => Promise<boolean>;

type ServingStatus = 'SERVING' | 'NOT_SERVING' | 'SERVICE_UNKNOWN';
interface HealthCheckRequest {
  service: string;
}

/** How often Watch probes again to tell a watcher of a change. */
const WATCH_INTERVAL_MS = 5_000;

/**
 * grpc.health.v1.Health: SERVING while the store and the bus answer, NOT_SERVING otherwise, for
 * the server as a whole (service "") and for each of its services. It asks for no credential, so
 * that load balancers and Kubernetes gRPC probes can call it, and says nothing but the status.
 */
export function healthService(
  probe: HealthProbe,
  logger: Logger,
  known: ReadonlySet<string> = new Set(),
): UntypedServiceImplementation {
  const statusOf = async (service: string): Promise<ServingStatus> => {
    if (service !== '' && known.size > 0 && !known.has(service)) return 'SERVICE_UNKNOWN';
    try {
      return (await probe()) ? 'SERVING' : 'NOT_SERVING';
    } catch (error) {
      logger.warn({ err: error }, 'health probe failed');
      return 'NOT_SERVING';
    }
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
      let last: ServingStatus | undefined;
      let timer: NodeJS.Timeout | undefined;
      const tick = async () => {
        const serving = await statusOf(call.request.service);
        if (call.cancelled) return;
        if (serving !== last) {
          last = serving;
          call.write({ status: serving });
        }
        timer = setTimeout(() => void tick(), WATCH_INTERVAL_MS);
      };
      call.on('cancelled', () => clearTimeout(timer));
      void tick();
    },
  };
}
