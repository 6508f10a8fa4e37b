import { z } from 'zod';
import type { Config } from '../../core/config/schema.ts';
import type { Tenant } from '../../core/domain/index.ts';

export const FeatureSchema = z.object({
  name: z.string(),
  enabled: z.boolean(),
  description: z.string(),
  /** The settings that switch it (docs/configuration.md); it changes with them, at start. */
  settings: z.array(z.string()),
  switchable: z
    .boolean()
    .describe('whether a tenant admin may switch it off and on again for the tenant (PATCH), the service having it on'),
});
export type Feature = z.infer<typeof FeatureSchema>;

/** The features a tenant may switch at run time, each where the service's configuration has it on. */
const SWITCHABLE: ReadonlySet<string> = new Set(['oracle_overrun_watch']);

/**
 * The optional capabilities of this control plane and whether its configuration switched each
 * on: what a client may ask before relying on one. Nothing here is secret.
 */
export function featuresFromConfig(config: Config): Feature[] {
  const features: Array<Omit<Feature, 'switchable'>> = [
    {
      name: 'llm_semantic_judge',
      enabled: config.semantic_judge_llm_url !== undefined,
      description: 'an LLM judges SEMANTIC conditions (mode per tenant), beside the built-in classifier',
      settings: ['SVC_SEMANTIC_JUDGE_LLM_URL', 'SVC_SEMANTIC_JUDGE_MODE', 'SVC_SEMANTIC_JUDGE_TENANT_MODES'],
    },
    {
      name: 'oracle_overrun_watch',
      enabled: config.oracle_interval_seconds > 0,
      description: 'the Oracle looks at every active budget for a coming overrun and warns',
      settings: ['SVC_ORACLE_INTERVAL_SECONDS'],
    },
    {
      name: 'jwt_auth',
      enabled: config.jwt_jwks_url !== undefined,
      description: 'bearer JWTs from the identity provider are accepted beside API keys',
      settings: ['SVC_JWT_JWKS_URL'],
    },
    {
      name: 'nats',
      enabled: config.nats_url !== undefined,
      description: 'events, rulesets and budget state travel over NATS (else an in-process bus)',
      settings: ['SVC_NATS_URL'],
    },
    {
      name: 'postgres_storage',
      enabled: config.database_url !== undefined,
      description: 'state is kept in PostgreSQL, shared by several replicas (else embedded LMDB)',
      settings: ['SVC_DATABASE_URL'],
    },
    {
      name: 'webhook_http',
      enabled: config.webhook_allow_http,
      description: 'alert webhooks may use plain http:// URLs',
      settings: ['SVC_WEBHOOK_ALLOW_HTTP'],
    },
  ];
  return features.map((f) => ({ ...f, switchable: f.enabled && SWITCHABLE.has(f.name) }));
}

/** Whether the tenant's admin switched the feature off for the tenant. */
export function switchedOff(tenant: Pick<Tenant, 'disabled_features'>, name: string): boolean {
  return tenant.disabled_features?.includes(name) === true;
}

/** The service's features as one tenant has them: on where the service has them and it did not switch them off. */
export function featuresOf(service: readonly Feature[], tenant: Pick<Tenant, 'disabled_features'>): Feature[] {
  return service.map((f) => (f.enabled && switchedOff(tenant, f.name) ? { ...f, enabled: false } : f));
}
