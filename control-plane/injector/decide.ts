import { ANNOTATIONS, INJECT_LABEL, SIDECAR_LABEL, SIDECAR_NAME } from './annotations.ts';
import type { Pod } from './admission-review.ts';
import { BudgetIdSchema, TenantIdSchema, type Binding, type InjectionTemplate } from './injection-template.ts';
import { namedSidecar, sharedWithSidecar, sidecarOf, sidecarOnlyReaches, sidecarSecrets } from './sidecar-only.ts';

/** A binding with everything a sidecar needs to start resolved. */
export interface ResolvedBinding extends Binding {
  tenant: string;
  budget: string;
  apiKeySecret: string;
}

export type Decision =
  | { action: 'skip'; reason: string }
  | { action: 'deny'; reason: string }
  | { action: 'inject'; binding: ResolvedBinding };

/** Why the pod asks to go without a sidecar, if it does. */
function optOut(pod: Pod): string | undefined {
  if (pod.metadata.annotations?.[ANNOTATIONS.inject] === 'false') return `annotation ${ANNOTATIONS.inject}: "false"`;
  const label = pod.metadata.labels?.[INJECT_LABEL];
  if (label === 'disabled' || label === 'false') return `label ${INJECT_LABEL}: ${label}`;
  if (pod.spec.hostNetwork === true) return 'hostNetwork (a sidecar there would serve the whole node)';
  return undefined;
}

/** What no container but the sidecar may reach in the namespace: its Secrets and its volumes. */
function sidecarOnly(pods: readonly Pod[], template: InjectionTemplate, binding: Binding) {
  const chosen = pods.map((pod) => pod.metadata.annotations?.[ANNOTATIONS.apiKeySecret]);
  const secrets = sidecarSecrets(template, binding);
  for (const name of chosen) if (name !== undefined) secrets.add(name);
  return (pod: Pod) => sidecarOnlyReaches(pod, secrets, sidecarOf(pod, template));
}

function refuseReaches(reaches: readonly string[]): Decision {
  return {
    action: 'deny',
    reason: `only the agent-governance sidecar may read its Secrets and volumes: ${reaches.join('; ')}`,
  };
}

/**
 * Whether a pod gets the sidecar, and bound to what. Pods the webhook must leave alone are
 * skipped; a pod in a governed namespace that cannot be bound (no tenant, budget or API key, or a
 * tenant other than the one its namespace is pinned to) is refused, so no agent starts ungoverned.
 * So is one with a container other than the sidecar that reaches the sidecar's Secrets, opted
 * out or not, and, in a namespace that enforces injection, one that opts out.
 */
export function decide(pod: Pod, namespace: string, template: InjectionTemplate): Decision {
  const annotations = pod.metadata.annotations ?? {};
  if (template.excludedNamespaces.includes(namespace)) return { action: 'skip', reason: 'excluded namespace' };
  const binding: Binding = { ...template.defaults, ...template.namespaces[namespace] };
  const reaches = sidecarOnly([pod], template, binding)(pod);
  if (reaches.length > 0) return refuseReaches(reaches);
  const opted = optOut(pod);
  if (opted !== undefined) {
    if (binding.enforce !== true) return { action: 'skip', reason: `opted out by ${opted}` };
    return {
      action: 'deny',
      reason: `namespace ${namespace} enforces agent-governance injection: ${opted} is refused`,
    };
  }
  // Only the webhook writes the sidecar: one the pod brings could run the sidecar's image with
  // its Secrets and another command, or over volumes the pod chose.
  const present = namedSidecar(pod);
  if (present !== undefined) {
    return {
      action: 'deny',
      reason: `the pod already has a container ${SIDECAR_NAME} (${present.image ?? 'no image'}): leave it out, the webhook adds the sidecar`,
    };
  }
  const shared = sharedWithSidecar(pod);
  if (shared.length > 0) {
    return {
      action: 'deny',
      reason: `the sidecar cannot be kept apart from the pod's other containers with ${shared.join(', ')}`,
    };
  }

  const pinned = template.namespaces[namespace]?.tenant ?? template.defaults.tenant;
  const requested = annotations[ANNOTATIONS.tenant];
  if (pinned !== undefined && requested !== undefined && requested !== pinned) {
    return {
      action: 'deny',
      reason: `annotation ${ANNOTATIONS.tenant}=${requested} differs from tenant ${pinned} that namespace ${namespace} is bound to`,
    };
  }
  // The namespace's key is the one its pods authenticate with: a pod naming another could borrow
  // the credential another pod of the namespace named for itself (another team's tenant, budgets
  // and scopes), which the webhook guards in that pod only.
  const namedKey = annotations[ANNOTATIONS.apiKeySecret];
  if (binding.apiKeySecret !== undefined && namedKey !== undefined && namedKey !== binding.apiKeySecret) {
    return {
      action: 'deny',
      reason: `annotation ${ANNOTATIONS.apiKeySecret}=${namedKey} differs from Secret ${binding.apiKeySecret} that namespace ${namespace} binds its sidecars' API key to; a pod names its own only where the namespace names none`,
    };
  }
  const problems: string[] = [];
  const fromAnnotation = <T>(key: string, parse: (v: string) => T | undefined): T | undefined => {
    const value = annotations[key];
    if (value === undefined) return undefined;
    const parsed = parse(value);
    if (parsed === undefined) problems.push(`annotation ${key} has an invalid value`);
    return parsed;
  };
  const tenant = fromAnnotation(ANNOTATIONS.tenant, (v) => TenantIdSchema.safeParse(v).data) ?? binding.tenant;
  const budget = fromAnnotation(ANNOTATIONS.budget, (v) => BudgetIdSchema.safeParse(v).data) ?? binding.budget;
  const apiKeySecret =
    fromAnnotation(ANNOTATIONS.apiKeySecret, (v) => (/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(v) ? v : undefined)) ??
    binding.apiKeySecret;
  // What the namespace (or the defaults) lets its pods charge: its allowed budgets, else its one
  // budget. A pod may narrow that by annotation, never widen it.
  const permitted = binding.allowedBudgets ?? (binding.budget === undefined ? undefined : [binding.budget]);
  const narrowed = fromAnnotation(ANNOTATIONS.allowedBudgets, (v) => {
    const ids = v.split(',').map((s) => s.trim());
    return ids.every((id) => BudgetIdSchema.safeParse(id).success) ? ids : undefined;
  });
  const beyond = narrowed?.filter((id) => permitted !== undefined && !permitted.includes(id)) ?? [];
  if (beyond.length > 0)
    problems.push(
      `annotation ${ANNOTATIONS.allowedBudgets} names ${beyond.join(', ')}, which namespace ${namespace} does not allow`,
    );
  const allowedBudgets = narrowed ?? binding.allowedBudgets;
  const missing = (what: string, annotation: string, value: string) =>
    problems.push(
      `no ${what}: set annotation ${annotation} or injection.namespaces.${namespace}.${value} in the chart`,
    );
  if (tenant === undefined) missing('tenant', ANNOTATIONS.tenant, 'tenant');
  if (budget === undefined) missing('budget', ANNOTATIONS.budget, 'budget');
  if (apiKeySecret === undefined) missing('API key Secret', ANNOTATIONS.apiKeySecret, 'apiKeySecret');
  if (budget !== undefined && [permitted, allowedBudgets].some((ids) => ids !== undefined && !ids.includes(budget))) {
    problems.push(`budget ${budget} is not among the allowed budgets`);
  }
  if (problems.length > 0 || tenant === undefined || budget === undefined || apiKeySecret === undefined) {
    return { action: 'deny', reason: `agent-governance cannot bind this pod's sidecar: ${problems.join('; ')}` };
  }
  return {
    action: 'inject',
    binding: {
      ...binding,
      tenant,
      budget,
      apiKeySecret,
      ...(allowedBudgets !== undefined ? { allowedBudgets } : {}),
    },
  };
}

/** What injection wrote on the pod's metadata: monitoring and the NATS NetworkPolicy select on it. */
const MARKS = [
  { what: `label ${SIDECAR_LABEL}`, of: (pod: Pod) => pod.metadata.labels?.[SIDECAR_LABEL] },
  ...[ANNOTATIONS.status, ANNOTATIONS.tenant, ANNOTATIONS.budget].map((key) => ({
    what: `annotation ${key}`,
    of: (pod: Pod) => pod.metadata.annotations?.[key],
  })),
];

/**
 * Whether an update of a pod may go ahead: it may not give a container other than the sidecar
 * what only the sidecar may reach (an ephemeral container mounting its volumes, naming its
 * Secrets or joining its processes), change the sidecar's image (another image, or another
 * release of it, would run with the sidecar's mounts), or change what injection wrote on the
 * pod. What the pod held before is not refused again, so a pod admitted earlier can still be
 * updated (a finalizer removed, a label set).
 */
export function decideUpdate(pod: Pod, previous: Pod, namespace: string, template: InjectionTemplate): Decision {
  if (template.excludedNamespaces.includes(namespace)) return { action: 'skip', reason: 'excluded namespace' };
  const binding: Binding = { ...template.defaults, ...template.namespaces[namespace] };
  const reaches = sidecarOnly([pod, previous], template, binding);
  const before = new Set(reaches(previous));
  const added = reaches(pod).filter((reach) => !before.has(reach));
  if (added.length > 0) return refuseReaches(added);
  const sidecarBefore = sidecarOf(previous, template);
  if (sidecarBefore !== undefined) {
    const image = sidecarOf(pod, template)?.image;
    if (image !== sidecarBefore.image)
      return { action: 'deny', reason: `the sidecar's image ${sidecarBefore.image ?? ''} may not change` };
    const changed = MARKS.filter(({ of }) => of(pod) !== of(previous)).map(({ what }) => what);
    if (changed.length > 0)
      return { action: 'deny', reason: `the injected pod's ${changed.join(', ')} may not change` };
  }
  return { action: 'skip', reason: 'update reaches nothing of the sidecar' };
}
