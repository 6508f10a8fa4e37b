/** Pod and namespace metadata the injection webhook reads and writes (docs/kubernetes.md). */
export const ANNOTATIONS = {
  /** `"false"` on a pod: never inject it. */
  inject: 'agent-governance.io/inject',
  /** Written on injection; a pod carrying it is never patched again. */
  status: 'agent-governance.io/status',
  tenant: 'agent-governance.io/tenant',
  budget: 'agent-governance.io/budget',
  /** Secret in the pod's namespace whose key `api-key` is the sidecar's API key. */
  apiKeySecret: 'agent-governance.io/api-key-secret',
  /** Comma-separated budget ids the agent may pick with `X-Svc-Budget-Id`. */
  allowedBudgets: 'agent-governance.io/allowed-budgets',
} as const;

export const INJECTED = 'injected';
/** Label on a pod: `disabled` (or `"false"`) opts it out, as the annotation does. */
export const INJECT_LABEL = 'agent-governance.io/inject';
/** Label set on injected pods; the chart's PodMonitor selects on it. */
export const SIDECAR_LABEL = 'agent-governance.io/sidecar';
export const SIDECAR_NAME = 'agent-governance-proxy';
/** Name of the sidecar's admin (metrics, probes) container port. */
export const ADMIN_PORT_NAME = 'svc-admin';
/** Key of the API key in the Secret named by the api-key-secret annotation. */
export const API_KEY_SECRET_KEY = 'api-key';
