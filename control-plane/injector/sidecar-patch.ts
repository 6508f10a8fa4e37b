import {
  ADMIN_PORT_NAME,
  ANNOTATIONS,
  API_KEY_SECRET_KEY,
  INJECTED,
  SIDECAR_LABEL,
  SIDECAR_NAME,
} from './annotations.ts';
import { pointerSegment, type Container, type JsonPatchOperation, type Pod } from './admission-review.ts';
import type { ResolvedBinding } from './decide.ts';
import type { InjectionTemplate } from './injection-template.ts';

/** Where the injected volumes are mounted. */
export const PATHS = {
  data: '/var/lib/agent-governance',
  trust: '/var/run/agent-governance/trust',
  bundle: '/var/run/agent-governance/trust/ca-bundle.pem',
  ca: '/etc/agent-governance/ca',
  providerKeys: '/etc/agent-governance/provider-keys',
  natsTls: '/etc/agent-governance/nats-tls',
  metricsToken: '/etc/agent-governance/metrics',
} as const;

const VOLUMES = {
  data: 'agent-governance-data',
  trust: 'agent-governance-trust',
  ca: 'agent-governance-ca',
  providerKeys: 'agent-governance-provider-keys',
  natsTls: 'agent-governance-nats-tls',
  metricsToken: 'agent-governance-metrics-token',
} as const;

/** The injected volume holding the trust bundle, which app containers mount read-only. */
export const TRUST_VOLUME = VOLUMES.trust;

/** The injected volumes no container but the sidecar mounts: its store and the Secrets it holds. */
export const SIDECAR_VOLUMES: ReadonlySet<string> = new Set([
  VOLUMES.data,
  VOLUMES.ca,
  VOLUMES.providerKeys,
  VOLUMES.natsTls,
  VOLUMES.metricsToken,
]);

/** Suffixes and hosts an agent reaches directly: loopback (the sidecar itself) and the cluster. */
const CLUSTER_LOCAL = ['localhost', '127.0.0.1', '::1', '.svc', '.cluster.local'];

// Secret volumes are mounted into the sidecar alone, so world-readable files reach no other
// container; a tighter mode would need the pod's fsGroup, which the webhook does not control.
const READABLE = 0o444;

type Env = { name: string; value?: string; valueFrom?: unknown };

/** The variables every app container gets: the proxy for HTTP(S), and the trust bundle for TLS. */
export function appEnvironment(template: InjectionTemplate): Env[] {
  const proxyUrl = `http://127.0.0.1:${template.sidecar.proxyPort}`;
  const noProxy = [...new Set([...CLUSTER_LOCAL, ...template.noProxy])].join(',');
  const env: Env[] = [];
  // Both spellings: curl reads only the lower-case http_proxy, and a lower-case value an image
  // sets would otherwise win over ours in the runtimes that prefer it.
  for (const [name, value] of [
    ['HTTPS_PROXY', proxyUrl],
    ['HTTP_PROXY', proxyUrl],
    ['NO_PROXY', noProxy],
  ]) {
    env.push({ name: name!, value: value! }, { name: name!.toLowerCase(), value: value! });
  }
  env.push(
    { name: 'NODE_USE_ENV_PROXY', value: '1' },
    { name: 'NODE_EXTRA_CA_CERTS', value: PATHS.bundle },
    { name: 'SSL_CERT_FILE', value: PATHS.bundle },
    { name: 'REQUESTS_CA_BUNDLE', value: PATHS.bundle },
  );
  return env;
}

function secretEnv(name: string, secret: string, key: string, optional = false): Env {
  return { name, valueFrom: { secretKeyRef: { name: secret, key, ...(optional ? { optional: true } : {}) } } };
}

function sidecarContainer(template: InjectionTemplate, binding: ResolvedBinding): Record<string, unknown> {
  const { sidecar } = template;
  const env: Env[] = [
    ...sidecar.env,
    { name: 'SVC_TENANT_ID', value: binding.tenant },
    { name: 'SVC_BUDGET_ID', value: binding.budget },
    secretEnv('SVC_API_KEY', binding.apiKeySecret, API_KEY_SECRET_KEY),
    { name: 'SVC_DATA_DIR', value: PATHS.data },
    { name: 'SVC_CA_CERT_FILE', value: `${PATHS.ca}/ca.crt` },
    { name: 'SVC_CA_KEY_FILE', value: `${PATHS.ca}/ca.key` },
    { name: 'SVC_PROXY_TRUST_BUNDLE_FILE', value: PATHS.bundle },
    // Traffic only from this pod's containers; metrics and probes from the kubelet and Prometheus.
    { name: 'SVC_PROXY_HOST', value: '127.0.0.1' },
    { name: 'SVC_PROXY_PORT', value: String(sidecar.proxyPort) },
    { name: 'SVC_PROXY_ADMIN_HOST', value: sidecar.adminHost },
    { name: 'SVC_PROXY_ADMIN_PORT', value: String(sidecar.adminPort) },
  ];
  if (binding.allowedBudgets !== undefined) {
    env.push({ name: 'SVC_ALLOWED_BUDGET_IDS', value: binding.allowedBudgets.join(',') });
  }
  if (binding.natsSecret !== undefined) {
    // Whichever the Secret holds: user and password, or a token.
    env.push(
      secretEnv('SVC_NATS_USER', binding.natsSecret, 'user', true),
      secretEnv('SVC_NATS_PASSWORD', binding.natsSecret, 'password', true),
      secretEnv('SVC_NATS_TOKEN', binding.natsSecret, 'token', true),
    );
  }
  if (template.natsTlsSecretName !== undefined) {
    env.push({ name: 'SVC_NATS_TLS_CA_FILE', value: `${PATHS.natsTls}/ca.crt` });
  }
  if (template.metricsTokenSecretName !== undefined) {
    env.push({ name: 'SVC_METRICS_TOKEN_FILE', value: `${PATHS.metricsToken}/token` });
  }
  for (const provider of Object.keys(binding.providerKeys?.keys ?? {})) {
    env.push({ name: `SVC_PROVIDER_KEY_FILE_${provider.toUpperCase()}`, value: `${PATHS.providerKeys}/${provider}` });
  }
  const mounts = [
    { name: VOLUMES.data, mountPath: PATHS.data },
    { name: VOLUMES.trust, mountPath: PATHS.trust },
    { name: VOLUMES.ca, mountPath: PATHS.ca, readOnly: true },
    ...(binding.providerKeys !== undefined
      ? [{ name: VOLUMES.providerKeys, mountPath: PATHS.providerKeys, readOnly: true }]
      : []),
    ...(template.natsTlsSecretName !== undefined
      ? [{ name: VOLUMES.natsTls, mountPath: PATHS.natsTls, readOnly: true }]
      : []),
    ...(template.metricsTokenSecretName !== undefined
      ? [{ name: VOLUMES.metricsToken, mountPath: PATHS.metricsToken, readOnly: true }]
      : []),
  ];
  const probe = (path: string, periodSeconds: number, failureThreshold: number) => ({
    httpGet: { path, port: ADMIN_PORT_NAME },
    periodSeconds,
    failureThreshold,
    timeoutSeconds: 2,
  });
  return {
    name: SIDECAR_NAME,
    image: sidecar.image,
    imagePullPolicy: sidecar.imagePullPolicy,
    args: sidecar.args,
    ...(sidecar.native ? { restartPolicy: 'Always' } : {}),
    env,
    ports: [{ name: ADMIN_PORT_NAME, containerPort: sidecar.adminPort, protocol: 'TCP' }],
    // The app starts only once this passes (native sidecar): ruleset in hand, trust bundle written.
    startupProbe: probe('/health/ready', 1, 300),
    readinessProbe: probe('/health/ready', 5, 3),
    livenessProbe: probe('/health/live', 10, 3),
    ...(sidecar.resources !== undefined ? { resources: sidecar.resources } : {}),
    ...(sidecar.securityContext !== undefined ? { securityContext: sidecar.securityContext } : {}),
    volumeMounts: mounts,
  };
}

function volumes(template: InjectionTemplate, binding: ResolvedBinding): Record<string, unknown>[] {
  const list: Record<string, unknown>[] = [
    { name: VOLUMES.data, emptyDir: { sizeLimit: template.sidecar.dataSizeLimit } },
    { name: VOLUMES.trust, emptyDir: { medium: 'Memory', sizeLimit: '4Mi' } },
    {
      name: VOLUMES.ca,
      secret: {
        secretName: template.caSecretName,
        defaultMode: READABLE,
        items: [
          { key: 'tls.crt', path: 'ca.crt' },
          { key: 'tls.key', path: 'ca.key' },
        ],
      },
    },
  ];
  if (binding.providerKeys !== undefined) {
    list.push({
      name: VOLUMES.providerKeys,
      secret: {
        secretName: binding.providerKeys.secretName,
        defaultMode: READABLE,
        items: Object.entries(binding.providerKeys.keys).map(([provider, key]) => ({ key, path: provider })),
      },
    });
  }
  if (template.natsTlsSecretName !== undefined) {
    list.push({
      name: VOLUMES.natsTls,
      secret: { secretName: template.natsTlsSecretName, items: [{ key: 'ca.crt', path: 'ca.crt' }] },
    });
  }
  if (template.metricsTokenSecretName !== undefined) {
    list.push({
      name: VOLUMES.metricsToken,
      secret: {
        secretName: template.metricsTokenSecretName,
        defaultMode: READABLE,
        items: [{ key: 'token', path: 'token' }],
      },
    });
  }
  return list;
}

/** The app container with the proxy variables set (replacing any of the same name) and the bundle mounted. */
function governedContainer(container: Container, env: Env[]): { env: unknown[]; volumeMounts: unknown[] } {
  const ours = new Set(env.map((e) => e.name));
  return {
    env: [...(container.env ?? []).filter((e) => !ours.has(e.name)), ...env],
    volumeMounts: [
      ...(container.volumeMounts ?? []).filter((m) => m.name !== VOLUMES.trust),
      { name: VOLUMES.trust, mountPath: PATHS.trust, readOnly: true },
    ],
  };
}

/** Adds `key: value` to a map at `path`, creating the map when the pod has none. */
function addToMap(
  ops: JsonPatchOperation[],
  path: string,
  existing: Record<string, string> | undefined,
  entries: Record<string, string>,
): void {
  if (existing === undefined) {
    ops.push({ op: 'add', path, value: entries });
    return;
  }
  for (const [key, value] of Object.entries(entries)) {
    ops.push({ op: 'add', path: `${path}/${pointerSegment(key)}`, value });
  }
}

/** Appends to an array at `path` (at its start when `first`), creating it when absent. */
function addToArray(
  ops: JsonPatchOperation[],
  path: string,
  existing: unknown[] | undefined,
  items: unknown[],
  first = false,
): void {
  if (existing === undefined) {
    ops.push({ op: 'add', path, value: items });
    return;
  }
  items.forEach((item, i) => ops.push({ op: 'add', path: `${path}/${first ? i : '-'}`, value: item }));
}

/** The JSON Patch that adds the bound sidecar to the pod and points every app container at it. */
export function injectionPatch(pod: Pod, template: InjectionTemplate, binding: ResolvedBinding): JsonPatchOperation[] {
  const ops: JsonPatchOperation[] = [];
  // The tenant and budget annotations record the resolved binding (the PodMonitor labels series with them).
  addToMap(ops, '/metadata/annotations', pod.metadata.annotations, {
    [ANNOTATIONS.status]: INJECTED,
    [ANNOTATIONS.tenant]: binding.tenant,
    [ANNOTATIONS.budget]: binding.budget,
  });
  addToMap(ops, '/metadata/labels', pod.metadata.labels, { [SIDECAR_LABEL]: INJECTED });
  addToArray(ops, '/spec/volumes', pod.spec.volumes, volumes(template, binding));
  const env = appEnvironment(template);
  pod.spec.containers.forEach((container, i) => {
    const governed = governedContainer(container, env);
    ops.push(
      { op: container.env === undefined ? 'add' : 'replace', path: `/spec/containers/${i}/env`, value: governed.env },
      {
        op: container.volumeMounts === undefined ? 'add' : 'replace',
        path: `/spec/containers/${i}/volumeMounts`,
        value: governed.volumeMounts,
      },
    );
  });
  const sidecar = sidecarContainer(template, binding);
  if (template.sidecar.native) addToArray(ops, '/spec/initContainers', pod.spec.initContainers, [sidecar], true);
  else addToArray(ops, '/spec/containers', pod.spec.containers, [sidecar]);
  return ops;
}
