import { z } from 'zod';
import type { Config } from '../../core/config/schema.ts';

export const FeatureSchema = z.object({
  name: z.string(),
  enabled: z.boolean(),
  description: z.string(),
  /** The settings that switch it (docs/configuration.md); it changes with them, at start. */
  settings: z.array(z.string()),
});
export type Feature = z.infer<typeof FeatureSchema>;

/**
 * The optional capabilities of this control plane and whether its configuration switched each
 * on: what a client may ask before relying on one. Nothing here is secret.
 */
export function featuresFromConfig(config: Config): Feature[] {
  return [
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
}
