import type { Signals, Subscription } from '../../core/bus/bus.ts';
import { syncSubjects, TerminateSignalSchema, type TerminateSignal } from '../../core/sync/contract.ts';

/** Subscribes to the tenant's terminate signals; malformed signals are dropped with a warning. */
export async function listenForTerminations(
  signals: Signals,
  tenantId: string,
  onTerminate: (signal: TerminateSignal) => void,
  logger: { warn(object: Record<string, unknown>, message: string): void },
): Promise<Subscription> {
  return signals.subscribeSignals(syncSubjects.terminate(tenantId), (data) => {
    const parsed = TerminateSignalSchema.safeParse(data);
    if (!parsed.success) {
      logger.warn({ issues: parsed.error.issues.length }, 'terminate signal does not parse; ignored');
      return;
    }
    onTerminate(parsed.data);
  });
}
