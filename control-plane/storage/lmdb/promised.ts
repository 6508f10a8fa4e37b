/** The synchronous form of an interface of async methods: what an LMDB repository implements. */
export type Sync<T> = {
  [K in keyof T]: T[K] extends (...args: infer A) => Promise<infer R> ? (...args: A) => R : never;
};

/**
 * The async interface over a synchronous implementation (LMDB reads and staged writes never
 * wait): every method resolves with what it returned, or rejects with what it threw.
 */
export function promised<T extends object>(implementation: Sync<T>): T {
  const facade: Record<string, (...args: unknown[]) => Promise<unknown>> = {};
  const methods = new Set<string>();
  for (
    let proto = Object.getPrototypeOf(implementation) as object | null;
    proto !== Object.prototype && proto !== null;
    proto = Object.getPrototypeOf(proto) as object | null
  ) {
    for (const name of Object.getOwnPropertyNames(proto)) if (name !== 'constructor') methods.add(name);
  }
  for (const name of methods) {
    const method = (implementation as Record<string, (...args: unknown[]) => unknown>)[name];
    if (typeof method !== 'function') continue;
    facade[name] = (...args) => {
      try {
        return Promise.resolve(method.apply(implementation, args));
      } catch (error) {
        return Promise.reject(error instanceof Error ? error : new Error(String(error)));
      }
    };
  }
  return facade as unknown as T;
}
