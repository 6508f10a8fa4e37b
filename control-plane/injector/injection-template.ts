import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { SvcError } from '../../core/errors/index.ts';

/** Kubernetes object names (DNS-1123 subdomain), as Secrets are named. */
const ObjectName = z
  .string()
  .max(253)
  .regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/, 'must be a Kubernetes object name (lower case, digits, - and .)');
export const TenantIdSchema = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be a tenant id (letters, digits, _ and -, at most 64)');
export const BudgetIdSchema = z.uuid('must be a budget id (a UUID)');

/** Providers whose credentials the sidecar can inject; each maps to `SVC_PROVIDER_KEY_FILE_<PROVIDER>`. */
export const PROVIDERS = ['openai', 'anthropic', 'gemini', 'azure_openai', 'openai_compatible'] as const;
const ProviderSchema = z.enum(PROVIDERS);

/** What binds a sidecar: set per namespace in the chart's values, overridden per pod by annotations. */
export const BindingSchema = z.strictObject({
  tenant: TenantIdSchema.optional(),
  budget: BudgetIdSchema.optional(),
  apiKeySecret: ObjectName.optional(),
  /** Secret with the tenant's NATS credentials (keys `user`/`password` or `token`). */
  natsSecret: ObjectName.optional(),
  allowedBudgets: z.array(BudgetIdSchema).optional(),
  /** Provider API keys mounted into the sidecar only: Secret name and, per provider, the key in it. */
  providerKeys: z
    .strictObject({ secretName: ObjectName, keys: z.partialRecord(ProviderSchema, z.string().min(1)) })
    .optional(),
  /** Pods may not opt out (annotation, label, hostNetwork): such a pod is refused, not skipped. */
  enforce: z.boolean().optional(),
});
export type Binding = z.infer<typeof BindingSchema>;

const port = z.number().int().min(1).max(65535);

/** The file the chart renders for the injector (`SVC_INJECTOR_TEMPLATE_FILE`). */
export const InjectionTemplateSchema = z.strictObject({
  sidecar: z.strictObject({
    image: z.string().min(1),
    imagePullPolicy: z.enum(['Always', 'IfNotPresent', 'Never']).default('IfNotPresent'),
    /** Native sidecar (an init container with `restartPolicy: Always`, Kubernetes 1.29+), else a plain container. */
    native: z.boolean().default(true),
    /** Arguments to the image's entry point that start the proxy. */
    args: z.array(z.string()).min(1),
    proxyPort: port.default(3128),
    adminPort: port.default(9464),
    adminHost: z.string().min(1).default('0.0.0.0'),
    /** Settings every sidecar shares (NATS URL, log level, lease sizes, ...), as `SVC_*` variables. */
    env: z.array(z.strictObject({ name: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/), value: z.string() })).default([]),
    resources: z.record(z.string(), z.unknown()).optional(),
    securityContext: z.record(z.string(), z.unknown()).optional(),
    /** Bound of the emptyDir holding the ruleset cache and the event outbox. */
    dataSizeLimit: z.string().default('1Gi'),
  }),
  /** Secret holding the proxy CA (`tls.crt`, `tls.key`), present in every governed namespace. */
  caSecretName: ObjectName,
  /** Secret holding the CA of NATS's TLS certificate (`ca.crt`), present in every governed namespace. */
  natsTlsSecretName: ObjectName.optional(),
  /**
   * Secret holding the metrics token (`token`), present in every governed namespace: the sidecar
   * serves `/metrics` only to a scrape bearing it (`SVC_METRICS_TOKEN_FILE`).
   */
  metricsTokenSecretName: ObjectName.optional(),
  /** Hosts reached directly, beside loopback and the cluster-local suffixes. */
  noProxy: z.array(z.string().min(1)).default([]),
  /** Namespaces never patched, whatever their labels. */
  excludedNamespaces: z.array(z.string()).default([]),
  defaults: BindingSchema.default({}),
  namespaces: z.record(z.string(), BindingSchema).default({}),
});
export type InjectionTemplate = z.infer<typeof InjectionTemplateSchema>;

/** Reads and validates the template; a bad one stops start-up with SVC-SYS-9002 naming the field. */
export function loadInjectionTemplate(path: string): InjectionTemplate {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new SvcError('SVC-SYS-9002', `invalid injection template ${path}: ${(error as Error).message}`, {}, [
      { field: 'SVC_INJECTOR_TEMPLATE_FILE', description: (error as Error).message },
    ]);
  }
  return parseInjectionTemplate(raw, path);
}

export function parseInjectionTemplate(raw: unknown, source = 'injection template'): InjectionTemplate {
  const result = InjectionTemplateSchema.safeParse(raw);
  if (result.success) return result.data;
  const violations = result.error.issues.map((issue) => ({
    field: issue.path.join('.') || '(root)',
    description: issue.message,
  }));
  throw new SvcError(
    'SVC-SYS-9002',
    `invalid injection template ${source}: ${violations.map((v) => `${v.field}: ${v.description}`).join('; ')}`,
    {},
    violations,
  );
}
