/**
 * @peculiar/x509 depends on tsyringe, which refuses to load unless `Reflect.getMetadata` exists
 * (normally supplied by the `reflect-metadata` package, not a dependency here). This installs the
 * three functions tsyringe calls, only when absent, before any module imports the library.
 * Import it first wherever `@peculiar/x509` is imported.
 */
type MetadataTarget = object;
type ReflectWithMetadata = typeof Reflect & {
  getMetadata?: (key: unknown, target: MetadataTarget) => unknown;
  getOwnMetadata?: (key: unknown, target: MetadataTarget) => unknown;
  defineMetadata?: (key: unknown, value: unknown, target: MetadataTarget) => void;
};

const reflect = Reflect as ReflectWithMetadata;
if (typeof reflect.getMetadata !== 'function') {
  const store = new WeakMap<MetadataTarget, Map<unknown, unknown>>();
  const getOwn = (key: unknown, target: MetadataTarget): unknown => store.get(target)?.get(key);
  reflect.getOwnMetadata = getOwn;
  reflect.getMetadata = (key, target) => {
    for (let at: MetadataTarget | null = target; at !== null; at = Object.getPrototypeOf(at) as MetadataTarget | null) {
      const value = getOwn(key, at);
      if (value !== undefined) return value;
    }
    return undefined;
  };
  reflect.defineMetadata = (key, value, target) => {
    let own = store.get(target);
    if (own === undefined) store.set(target, (own = new Map()));
    own.set(key, value);
  };
}
