import { asError } from '../../../core/errors/index.ts';

/** The synchronous form of an interface of async methods: what an LMDB repository implements. */
export type Sync<T> = {
  [K in keyof T]: T[K] extends (...args: infer A) => Promise<infer R> ? (...args: A) => R : never;
};

const IMPLEMENTATION = Symbol('implementation');

type Facade = Record<string | symbol, unknown>;

/** Per implementation prototype, the prototype of its facades: built once, not per transaction. */
const facadePrototypes = new WeakMap<object, object>();

function facadePrototype(proto: object): object {
  let facade = facadePrototypes.get(proto);
  if (facade !== undefined) return facade;
  const methods = new Map<string, (this: Facade, ...args: unknown[]) => Promise<unknown>>();
  for (
    let p: object | null = proto;
    p !== Object.prototype && p !== null;
    p = Object.getPrototypeOf(p) as object | null
  ) {
    for (const name of Object.getOwnPropertyNames(p)) {
      if (name === 'constructor' || methods.has(name)) continue;
      // Read without calling an accessor: only methods are wrapped.
      if (typeof Object.getOwnPropertyDescriptor(p, name)?.value !== 'function') continue;
      methods.set(name, function (...args) {
        const implementation = this[IMPLEMENTATION] as Record<string, (...a: unknown[]) => unknown>;
        try {
          return Promise.resolve(implementation[name]!(...args));
        } catch (error) {
          return Promise.reject(asError(error));
        }
      });
    }
  }
  facade = Object.fromEntries(methods);
  facadePrototypes.set(proto, facade);
  return facade;
}

/**
 * The async interface over a synchronous implementation (LMDB reads and staged writes never
 * wait): every method resolves with what it returned, or rejects with what it threw. A
 * transaction makes a dozen of these, so each is one object over a shared prototype.
 */
export function promised<T extends object>(implementation: Sync<T>): T {
  const facade = Object.create(facadePrototype(Object.getPrototypeOf(implementation) as object)) as Facade;
  facade[IMPLEMENTATION] = implementation;
  return facade as unknown as T;
}
