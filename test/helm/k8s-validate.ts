/**
 * Validates Kubernetes objects against the schemas of `kubernetes-models` (the built-in API) and
 * the operator models (`@kubernetes-models/prometheus-operator`, `@kubernetes-models/cert-manager`).
 *
 * Their `.validate()` ignores fields it does not know (the schemas carry no additionalProperties),
 * while the API server drops them or refuses them with strict field validation. So validation runs
 * on a proxy of the object that records which properties the validator reads: the validator reads
 * every property its schema declares and enumerates the keys of maps; a property it neither read
 * nor enumerated is unknown to the schema, and is refused here.
 */

interface Model {
  new (data: unknown): { validate(): void };
}

async function modelFor(apiVersion: string, kind: string): Promise<Model> {
  const [group, version] = apiVersion.includes('/') ? apiVersion.split('/') : ['', apiVersion];
  const specifier =
    group === 'monitoring.coreos.com'
      ? `@kubernetes-models/prometheus-operator/${apiVersion}/${kind}`
      : group === 'cert-manager.io'
        ? `@kubernetes-models/cert-manager/${apiVersion}/${kind}`
        : group === ''
          ? `kubernetes-models/${version}/${kind}`
          : `kubernetes-models/${group}/${version}/${kind}`;
  const module = (await import(specifier)) as Record<string, Model | undefined>;
  const model = module[kind];
  if (model === undefined) throw new Error(`no schema for ${apiVersion} ${kind} (${specifier})`);
  return model;
}

interface Reads {
  value: object;
  read: Set<string>;
  enumerated: boolean;
}

function tracked(value: unknown, path: string, seen: Map<string, Reads>): unknown {
  if (value === null || typeof value !== 'object') return value;
  const reads: Reads = { value, read: new Set(), enumerated: false };
  seen.set(path, reads);
  return new Proxy(value, {
    get(target, key, receiver) {
      const v: unknown = Reflect.get(target, key, receiver);
      if (typeof key !== 'string' || !Object.hasOwn(target, key)) return v;
      reads.read.add(key);
      return tracked(v, `${path}/${key}`, seen);
    },
    has(target, key) {
      if (typeof key === 'string') reads.read.add(key);
      return Reflect.has(target, key);
    },
    ownKeys(target) {
      reads.enumerated = true;
      return Reflect.ownKeys(target);
    },
  });
}

/** Throws with every schema violation and every unknown field of the object (JSON paths). */
export async function validateStrict(object: any): Promise<void> {
  const name = `${object?.kind} ${object?.metadata?.name}`;
  const Model = await modelFor(String(object?.apiVersion), String(object?.kind));
  const seen = new Map<string, Reads>();
  const copy: unknown = JSON.parse(JSON.stringify(object));
  const proxied = tracked(copy, '', seen);
  try {
    Model.prototype.validate.call(proxied);
  } catch (error) {
    throw new Error(`${name}: ${(error as Error).message}`, { cause: error });
  }
  const unknown: string[] = [];
  for (const [path, reads] of seen) {
    if (Array.isArray(reads.value) || reads.enumerated) continue;
    for (const key of Object.keys(reads.value)) if (!reads.read.has(key)) unknown.push(`${path}/${key}`);
  }
  if (unknown.length > 0) throw new Error(`${name}: unknown fields ${unknown.join(', ')}`);
}
