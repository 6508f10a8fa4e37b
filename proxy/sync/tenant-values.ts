import type { z } from 'zod';
import type { KeyValueStores, Subscription } from '../../core/bus/bus.ts';

/** What of a key-value bucket a proxy watches: its tenant's values of one kind. */
export interface WatchedValues<T extends { tenant_id: string }> {
  bucket: string;
  filter: (tenant: string) => string;
  schema: z.ZodType<T>;
  /** Names the value in the warning about one that is ignored. */
  what: string;
  /** The key a value must lie under, where the key names the value. */
  keyOf?: (tenant: string, value: T) => string;
}

/**
 * Watches the tenant's values of a bucket, those present at start first. A value that does not
 * parse, is another tenant's or lies under another key than its own is ignored with a warning.
 */
export async function watchTenantValues<T extends { tenant_id: string }>(
  keyValue: KeyValueStores,
  watched: WatchedValues<T>,
  tenantId: string,
  onValue: (value: T) => void,
  logger: { warn(object: Record<string, unknown>, message: string): void },
): Promise<Subscription> {
  const bucket = await keyValue.open(watched.bucket);
  return bucket.watch(watched.filter(tenantId), (entry) => {
    if (entry.operation !== 'PUT') return;
    const parsed = watched.schema.safeParse(entry.value);
    if (
      !parsed.success ||
      parsed.data.tenant_id !== tenantId ||
      (watched.keyOf !== undefined && entry.key !== watched.keyOf(tenantId, parsed.data))
    ) {
      logger.warn({ key: entry.key }, `${watched.what} does not parse; ignored`);
      return;
    }
    onValue(parsed.data);
  });
}
