import type { Container, Pod } from './admission-review.ts';
import { SIDECAR_NAME } from './annotations.ts';
import type { Binding, InjectionTemplate } from './injection-template.ts';
import { SIDECAR_VOLUMES } from './sidecar-patch.ts';

/**
 * The Secrets a namespace's sidecars hold: the proxy CA with its key, the provider keys of
 * credential injection, the tenant's API key and NATS credentials, and NATS's CA. Whoever may
 * create pods in a namespace may mount any of its Secrets, so these stay the sidecar's only while
 * the webhook refuses every other container that names one.
 */
export function sidecarSecrets(template: InjectionTemplate, binding: Binding, podApiKeySecret?: string): Set<string> {
  const names = [
    template.caSecretName,
    template.natsTlsSecretName,
    binding.providerKeys?.secretName,
    binding.natsSecret,
    binding.apiKeySecret,
    podApiKeySecret,
  ];
  return new Set(names.filter((name): name is string => name !== undefined && name !== ''));
}

/** An image reference without its tag or digest: `registry:5000/team/proxy:1.2@sha256:…` → `registry:5000/team/proxy`. */
function repositoryOf(image: string): string {
  const name = image.split('@')[0] ?? '';
  const colon = name.lastIndexOf(':');
  return colon > name.lastIndexOf('/') ? name.slice(0, colon) : name;
}

/** The pod's sidecar container: one bearing its name and running the chart's sidecar image. */
export function sidecarOf(pod: Pod, template: InjectionTemplate): Container | undefined {
  const named = [...pod.spec.containers, ...(pod.spec.initContainers ?? [])].find((c) => c.name === SIDECAR_NAME);
  if (named === undefined) return undefined;
  return repositoryOf(named.image ?? '') === repositoryOf(template.sidecar.image) ? named : undefined;
}

/**
 * Each way a container other than the sidecar reaches what only the sidecar may: one of
 * `secrets` by a variable, `envFrom` or a mounted volume (a Secret volume or a projected one
 * with a Secret source), or one of the sidecar's own injected volumes. Described for the user,
 * e.g. `container agent mounts volume keys of Secret llm-keys`. Ephemeral containers
 * (`kubectl debug`) count: they may mount the pod's volumes.
 */
export function sidecarOnlyReaches(pod: Pod, secrets: ReadonlySet<string>, sidecar: Container | undefined): string[] {
  const found: string[] = [];
  const volumeSecrets = new Map<string, string[]>();
  for (const volume of pod.spec.volumes ?? []) {
    const named = [volume.secret?.secretName, ...(volume.projected?.sources ?? []).map((s) => s.secret?.name)];
    volumeSecrets.set(
      volume.name,
      named.filter((name): name is string => name !== undefined && secrets.has(name)),
    );
  }
  const containers = [
    ...(pod.spec.initContainers ?? []),
    ...pod.spec.containers,
    ...(pod.spec.ephemeralContainers ?? []),
  ];
  for (const container of containers) {
    if (container === sidecar) continue;
    const who = `container ${container.name}`;
    for (const variable of container.env ?? []) {
      const secret = variable.valueFrom?.secretKeyRef?.name;
      if (secret !== undefined && secrets.has(secret))
        found.push(`${who} reads Secret ${secret} into variable ${variable.name}`);
    }
    for (const source of container.envFrom ?? []) {
      const secret = source.secretRef?.name;
      if (secret !== undefined && secrets.has(secret)) found.push(`${who} reads Secret ${secret} as variables`);
    }
    for (const mount of container.volumeMounts ?? []) {
      if (SIDECAR_VOLUMES.has(mount.name)) found.push(`${who} mounts the sidecar's volume ${mount.name}`);
      for (const secret of volumeSecrets.get(mount.name) ?? [])
        found.push(`${who} mounts volume ${mount.name} of Secret ${secret}`);
    }
  }
  return found;
}

/** Fields the API server fills in on a container it stores, and the resources a LimitRange sets. */
const DEFAULTED = new Set(['terminationMessagePath', 'terminationMessagePolicy', 'resources']);

/** Whether `actual` holds everything `expected` does: extra keys in objects, never extra items. */
function holds(expected: unknown, actual: unknown): boolean {
  if (Array.isArray(expected))
    return Array.isArray(actual) && actual.length === expected.length && expected.every((e, i) => holds(e, actual[i]));
  if (expected !== null && typeof expected === 'object') {
    if (actual === null || typeof actual !== 'object' || Array.isArray(actual)) return false;
    const fields = actual as Record<string, unknown>;
    return Object.entries(expected).every(([key, value]) => holds(value, fields[key]));
  }
  return Object.is(expected, actual);
}

/**
 * The first field in which a sidecar container found in a pod differs from the one injection
 * builds (`expected`), or undefined when it is that container: the same image repository (a tag
 * may be older), the same command, arguments, variables, mounts and probes, and nothing more
 * than what the API server fills in when it stores a pod (probe defaults, a mount's `readOnly`).
 * Kubernetes refuses a probe with two handlers, so a defaulted probe cannot hide an `exec`.
 */
export function sidecarDifference(present: Container, expected: Record<string, unknown>): string | undefined {
  for (const key of Object.keys(present)) {
    if (!(key in expected) && !DEFAULTED.has(key)) return key;
  }
  for (const [key, value] of Object.entries(expected)) {
    if (key === 'image') {
      if (repositoryOf(present.image ?? '') !== repositoryOf(String(value))) return key;
    } else if (key !== 'imagePullPolicy' && key !== 'resources' && !holds(value, present[key])) return key;
  }
  return undefined;
}
