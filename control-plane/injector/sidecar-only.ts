import type { Container, Pod } from './admission-review.ts';
import { SIDECAR_NAME } from './annotations.ts';
import type { Binding, InjectionTemplate } from './injection-template.ts';
import { SIDECAR_VOLUMES, TRUST_VOLUME } from './sidecar-patch.ts';

/**
 * The Secrets a namespace's sidecars hold: the proxy CA with its key, the provider keys of
 * credential injection, the tenant's API key and NATS credentials, NATS's CA and the metrics token. Whoever may
 * create pods in a namespace may mount any of its Secrets, so these stay the sidecar's only while
 * the webhook refuses every other container that names one.
 */
export function sidecarSecrets(template: InjectionTemplate, binding: Binding): Set<string> {
  const names = [
    template.caSecretName,
    template.natsTlsSecretName,
    template.metricsTokenSecretName,
    binding.providerKeys?.secretName,
    binding.natsSecret,
    binding.apiKeySecret,
  ];
  return new Set(names.filter((name): name is string => name !== undefined && name !== ''));
}

/** An image reference without its tag or digest: `registry:5000/team/proxy:1.2@sha256:…` → `registry:5000/team/proxy`. */
function repositoryOf(image: string): string {
  const name = image.split('@')[0] ?? '';
  const colon = name.lastIndexOf(':');
  return colon > name.lastIndexOf('/') ? name.slice(0, colon) : name;
}

/** The pod's container bearing the sidecar's name, whatever it runs. */
export function namedSidecar(pod: Pod): Container | undefined {
  return [...pod.spec.containers, ...(pod.spec.initContainers ?? [])].find((c) => c.name === SIDECAR_NAME);
}

/** The pod's sidecar container: one bearing its name and running the chart's sidecar image. */
export function sidecarOf(pod: Pod, template: InjectionTemplate): Container | undefined {
  const named = namedSidecar(pod);
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
    // `kubectl debug --target`: the sidecar's processes, their memory, environment and files.
    if (container.targetContainerName === SIDECAR_NAME) found.push(`${who} targets the sidecar's processes`);
    for (const mount of container.volumeMounts ?? []) {
      if (SIDECAR_VOLUMES.has(mount.name)) found.push(`${who} mounts the sidecar's volume ${mount.name}`);
      // The bundle the agent trusts, and a link planted there the sidecar would write through.
      if (mount.name === TRUST_VOLUME && mount.readOnly !== true)
        found.push(`${who} mounts the trust bundle's volume ${mount.name} writable`);
      for (const secret of volumeSecrets.get(mount.name) ?? [])
        found.push(`${who} mounts volume ${mount.name} of Secret ${secret}`);
    }
  }
  return found;
}

/**
 * What in a pod would let its other containers reach into the sidecar, or steer its connections:
 * one process namespace (their processes could read its memory, its environment and its files
 * through /proc, and signal it), host aliases and DNS settings, which apply to the sidecar too and
 * could send its NATS connection, credentials and all, to a server the agent runs.
 */
export function sharedWithSidecar(pod: Pod): string[] {
  const found: string[] = [];
  if (pod.spec.shareProcessNamespace === true) found.push('shareProcessNamespace: true');
  if (pod.spec.hostPID === true) found.push('hostPID: true');
  if ((pod.spec.hostAliases ?? []).length > 0) found.push('hostAliases');
  if (pod.spec.dnsPolicy === 'None') found.push('dnsPolicy: None');
  if (pod.spec.dnsConfig !== undefined) found.push('dnsConfig');
  return found;
}
