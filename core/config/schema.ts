import { z } from 'zod';

const port = z.coerce.number().int().min(0).max(65535);
const optionalString = z.string().min(1).optional();

/**
 * Every setting of both processes. Each key is settable in the config file (JSON, path in
 * SVC_CONFIG_FILE) and by an environment variable `SVC_<KEY>` (the key upper-cased), which wins.
 */
export const ConfigSchema = z.object({
  mode: z.enum(['standalone', 'control-plane', 'proxy']).default('standalone'),
  data_dir: z.string().min(1).default('./data'),
  log_level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  version: z.string().default('1.0.0'),

  http_host: z.string().default('0.0.0.0'),
  http_port: port.default(8080),
  grpc_port: port.default(50051),
  body_limit_bytes: z.coerce.number().int().positive().default(1_048_576),

  nats_url: optionalString,
  nats_user: optionalString,
  nats_password: optionalString,
  nats_token: optionalString,
  nats_creds_file: optionalString,
  nats_tls_ca_file: optionalString,
  nats_tls_cert_file: optionalString,
  nats_tls_key_file: optionalString,
  /** Reply inbox prefix; a proxy defaults to `_INBOX_<tenant>`, the prefix its credentials allow. */
  nats_inbox_prefix: optionalString,

  bootstrap_admin_key: z.string().min(24, 'must be at least 24 characters').optional(),
  jwt_jwks_url: z.url().optional(),
  jwt_issuer: optionalString,
  jwt_audience: optionalString,
  jwt_tenant_claim: z.string().default('tenant_id'),
  rate_limit_per_minute: z.coerce.number().int().positive().default(600),

  webhook_secret: optionalString,
  webhook_max_attempts: z.coerce.number().int().min(1).max(20).default(5),
  webhook_timeout_ms: z.coerce.number().int().positive().default(5000),

  price_overrides_file: optionalString,
  lease_ttl_seconds: z.coerce.number().int().min(5).max(3600).default(60),
  /** At most the consumer's max_ack_pending (1000): a larger batch could never fill and would stall. */
  processor_batch_size: z.coerce.number().int().min(1).max(1000).default(512),
  processor_max_wait_ms: z.coerce.number().int().min(1).max(10_000).default(20),

  proxy_host: z.string().default('0.0.0.0'),
  proxy_port: port.default(3128),
  proxy_admin_port: port.default(9464),
  /** Listen address of the admin port (metrics, probes); `proxy_host` when unset. */
  proxy_admin_host: optionalString,
  /** Where the proxy writes, at start, the public roots plus its CA for the agent to trust. */
  proxy_trust_bundle_file: optionalString,
  tenant_id: optionalString,
  api_key: optionalString,
  budget_id: optionalString,
  ca_cert_file: optionalString,
  ca_key_file: optionalString,
  upstream_overrides: z.string().default(''),
  upstream_ca_file: optionalString,

  /** Extra hosts whose CONNECT tunnels are intercepted (tool APIs); comma-separated `host` or `*.domain`. */
  proxy_intercept_hosts: z.string().default(''),
  /** Hosts of OpenAI-compatible servers (vLLM, Ollama), metered with the OpenAI format; comma-separated. */
  proxy_compatible_hosts: z.string().default(''),
  /** MCP servers governed by the proxy, `name=url` comma-separated: reverse route `/mcp/<name>`, host intercepted. */
  proxy_mcp_servers: z.string().default(''),
  /** Without any ruleset (none synced, none cached): `closed` refuses every governed call, `open` allows. */
  proxy_policy_fail_mode: z.enum(['closed', 'open']).default('closed'),
  /** What one budget may spend through this proxy while the control plane cannot grant a lease. */
  proxy_soft_limit_usd: z.coerce.number().nonnegative().default(1),
  proxy_soft_limit_tokens: z.coerce.number().int().nonnegative().default(200_000),
  /** The slice of a budget asked for per lease request. */
  proxy_lease_usd: z.coerce.number().positive().default(1),
  proxy_lease_tokens: z.coerce.number().int().positive().default(200_000),
  /** Renew in the background once less than this fraction of the lease is left. */
  proxy_lease_renew_below: z.coerce.number().gt(0).lt(1).default(0.5),
  proxy_lease_timeout_ms: z.coerce.number().int().positive().default(2000),
  /** How long the first call on a budget never seen before may wait for its first lease. */
  proxy_lease_first_wait_ms: z.coerce.number().int().nonnegative().default(500),
  /** Largest request body the proxy reads to govern a call. */
  proxy_body_limit_bytes: z.coerce
    .number()
    .int()
    .positive()
    .default(32 * 1024 * 1024),
  /** Distinct model labels per metric before further models are counted as `other`. */
  proxy_model_label_cap: z.coerce.number().int().positive().default(50),
  /** The injection webhook (`npm run injector`): HTTPS port, serving certificate, sidecar template. */
  injector_port: port.default(8443),
  injector_tls_cert_file: optionalString,
  injector_tls_key_file: optionalString,
  injector_template_file: optionalString,

  /** Price of a model missing from the table: `zero`, or `fixed:<input>:<output>` USD per million tokens. */
  unknown_model_price: z
    .string()
    .regex(/^(zero|fixed:\d+(\.\d+)?:\d+(\.\d+)?)$/, 'must be zero or fixed:<input>:<output>')
    .default('zero'),
});

export type Config = z.infer<typeof ConfigSchema>;
export type ConfigKey = keyof Config;

export const CONFIG_KEYS = Object.keys(ConfigSchema.shape) as ConfigKey[];

export function envName(key: ConfigKey): string {
  return `SVC_${key.toUpperCase()}`;
}
