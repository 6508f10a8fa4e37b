import { z } from 'zod';

/** A whole number, read from an environment variable's text as well as from the config file. */
const integer = z.coerce.number().int();
const port = integer.min(0).max(65535);
const optionalString = z.string().min(1).optional();
const listed = (value: string): string[] =>
  value
    .split(',')
    .map((v) => v.trim())
    .filter((v) => v !== '');
/** An https URL, or an http one to a loopback host (`localhost`, 127.0.0.0/8, ::1). */
function secureFetchUrl(value: string): boolean {
  const url = URL.parse(value);
  if (url === null) return false;
  if (url.protocol === 'https:') return true;
  const host = url.hostname;
  return url.protocol === 'http:' && (host === 'localhost' || host === '[::1]' || /^127(\.\d+){3}$/.test(host));
}
const cidr = z.union([z.cidrv4(), z.cidrv6(), z.ipv4(), z.ipv6()]);
/** Comma-separated CIDRs (or single addresses), e.g. `10.96.0.0/12,fd00::/8`. */
const cidrList = z
  .string()
  .default('')
  .refine((v) => listed(v).every((c) => cidr.safeParse(c).success), 'must be comma-separated CIDRs such as 10.0.0.0/8');

/**
 * Every setting of both processes. Each key is settable in the config file (JSON, path in
 * SVC_CONFIG_FILE) and by an environment variable `SVC_<KEY>` (the key upper-cased), which wins.
 */
const settings = z.object({
  mode: z.enum(['standalone', 'control-plane', 'proxy']).default('standalone'),
  data_dir: z.string().min(1).default('./data'),
  /**
   * The control plane's PostgreSQL (`postgres://user:password@host:5432/db`), for more than one
   * replica; LMDB under `<data_dir>/control-plane` when unset. Holds a password: never logged.
   */
  database_url: z.url({ protocol: /^postgres(ql)?$/, error: 'must be a postgres:// or postgresql:// URL' }).optional(),
  /** Connections each control-plane replica keeps to PostgreSQL. */
  database_pool_size: integer.min(1).max(1000).default(10),
  log_level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** How often each process publishes svc.system.health and svc.system.metrics (spec 6.2); 0: never. */
  system_report_interval_ms: integer.min(0).max(3_600_000).default(30_000),
  version: z.string().default('1.0.0'),

  /** Loopback by default: nothing is reachable from other machines until an address is chosen. */
  http_host: z.string().default('127.0.0.1'),
  http_port: port.default(8080),
  /** The gRPC server's port; it binds http_host like the HTTP listener. */
  grpc_port: port.default(50051),
  /** Largest gRPC message received or sent (spec 8: 4 MB). */
  grpc_max_message_bytes: integer
    .min(1024)
    .max(64 * 1_048_576)
    .default(4 * 1_048_576),
  /** Deadline of a gRPC call whose client set none, or a later one (spec 8: 30 s). */
  grpc_default_timeout_ms: integer.positive().max(600_000).default(30_000),
  /** Streams one gRPC connection may have open at once; one more is refused with REFUSED_STREAM. */
  grpc_max_concurrent_streams: integer.min(1).max(10_000).default(100),
  /** Megabytes one gRPC connection's HTTP/2 session may buffer before it is closed. */
  grpc_max_session_memory_mb: integer.min(1).max(1024).default(64),
  /** A gRPC connection with no call open for this long is closed. */
  grpc_max_connection_idle_ms: integer.min(1000).max(86_400_000).default(300_000),
  /** A gRPC connection is closed (after GOAWAY) at this age. */
  grpc_max_connection_age_ms: integer.min(1000).max(604_800_000).default(3_600_000),
  /**
   * Bytes of gRPC request messages received and not yet answered, all calls together: a message
   * past it is refused (RESOURCE_EXHAUSTED, SVC-SYS-9005). At least one largest message.
   */
  grpc_max_received_bytes: integer
    .min(1024)
    .max(4096 * 1_048_576)
    .default(64 * 1_048_576),
  body_limit_bytes: integer.positive().default(1_048_576),
  /**
   * Versions one execution keeps, whatever a save's `max_versions` (0 there means no bound of the
   * caller's): past it the oldest go. With the two bounds below, what a tenant can store is bounded.
   */
  checkpoint_max_versions: integer.min(1).max(1_000_000).default(1000),
  /** Executions of one tenant that may have checkpoints; a save that would start one more is refused. */
  checkpoint_executions_per_tenant: integer.min(1).max(10_000_000).default(10_000),
  /** Executions of one tenant that may have an execution context; an update that would start one more is refused. */
  execution_contexts_per_tenant: integer.min(1).max(10_000_000).default(10_000),
  /**
   * How long a REST or MCP request may take to arrive, headers and body: one sent slower is
   * answered 408 and its connection closed, so slow bodies cannot hold connections and buffers.
   */
  http_request_timeout_ms: integer.min(1000).max(600_000).default(30_000),
  /**
   * The URL clients reach this process by; error bodies link to `<it>/docs/errors/<code>`. Default:
   * the process's own listening address (for the proxy, its admin port).
   */
  public_base_url: z.url({ protocol: /^https?$/ }).optional(),

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
  /** Copy the bus messages a consumer sets aside to the dead-letter stream (`on`), or only count and log them. */
  nats_dead_letters: z.enum(['on', 'off']).default('on'),
  /**
   * Limits of the event stream (and, for replicas, the dead-letter stream). Unset, a new stream
   * gets 10 GiB, 7 days, 1 replica and an existing one keeps a larger value it has; set, they are
   * applied at each start, lowering included (docs/nats.md, "Stream limits").
   */
  nats_stream_max_bytes: integer.min(1_048_576).optional(),
  nats_stream_max_age_seconds: integer.min(60).optional(),
  nats_stream_replicas: integer.min(1).max(5).optional(),
  /** At the event stream's max bytes: `old` drops the oldest events, `new` refuses publishes (they stay in the outboxes). */
  nats_stream_discard: z.enum(['old', 'new']).default('old'),
  /** Limits of the dead-letter stream; unset as for the event stream (1 GiB, 30 days). */
  nats_dead_letter_max_bytes: integer.min(1_048_576).optional(),
  nats_dead_letter_max_age_seconds: integer.min(60).optional(),
  /**
   * Messages each durable consumer (the event processor's is shared by all replicas) may hold
   * delivered and unacknowledged: at least replicas × SVC_PROCESSOR_BATCH_SIZE (default 8192).
   */
  nats_max_ack_pending: integer.min(1000).max(1_000_000).optional(),
  /**
   * How long a message delivered to a process that died waits before another is handed it
   * (default 30 s). A delivery under way extends it; messages pulled and waiting their turn do not.
   */
  nats_ack_wait_seconds: integer.min(2).max(3_600).optional(),

  bootstrap_admin_key: z
    .string()
    .min(24, 'must be at least 24 characters')
    // The README's placeholder is public: a copied command must not run with it as the root key.
    .refine(
      (key) => !key.toLowerCase().includes('change-me'),
      'is a placeholder; use a random secret, e.g. $(openssl rand -hex 24)',
    )
    .optional(),
  /**
   * File holding the bearer token with which a scrape of the control plane's /metrics also reads
   * the per-tenant budget series (tenant and budget ids, spend, limits); without it, no scrape does.
   */
  metrics_token_file: optionalString,
  /**
   * The identity provider's JWKS; setting it accepts bearer JWTs, and then jwt_issuer and
   * jwt_audience are required. Fetched over https: a key set read in the clear lets anyone on the
   * path sign tokens. A loopback host may use http (a JWKS served beside the process, tests).
   */
  jwt_jwks_url: z
    .string()
    .refine(secureFetchUrl, 'must be an https:// URL (http:// only for a loopback host)')
    .optional(),
  jwt_issuer: optionalString,
  jwt_audience: optionalString,
  jwt_tenant_claim: z.string().min(1).default('tenant_id'),
  /**
   * Longest lifetime (`exp` − `iat`) of an accepted JWT: a token the identity provider issued for
   * longer is refused, so a leaked token is bounded even where the provider is lax.
   */
  jwt_max_lifetime_seconds: integer.min(60).max(604_800).default(86_400),
  /** The stdio MCP entry (`npm run mcp`): the control plane it forwards to, and the API key it uses there. */
  mcp_control_plane_url: z.url({ protocol: /^https?$/ }).optional(),
  mcp_api_key: optionalString,
  rate_limit_per_minute: integer.positive().default(600),
  /** Failed authentications per client address and minute, after which its requests are refused until the minute ends. */
  auth_failures_per_minute: integer.min(1).max(100_000).default(30),

  /** Plain-HTTP alert webhook URLs are refused unless this is true. */
  webhook_allow_http: z.union([z.boolean(), z.stringbool()]).default(false),
  /** Host names (`hooks.internal`, `*.corp.example`), addresses and CIDRs webhooks may reach although private. */
  webhook_allowed_hosts: z.string().default(''),
  /** After a rotation, how long deliveries also carry a signature made with the replaced secret. */
  webhook_secret_grace_seconds: integer
    .min(0)
    .max(30 * 86_400)
    .default(86_400),
  webhook_max_attempts: integer.min(1).max(20).default(5),
  webhook_timeout_ms: integer.positive().default(5000),

  price_overrides_file: optionalString,
  lease_ttl_seconds: integer.min(5).max(3600).default(60),
  /** At most 1000, the lowest nats_max_ack_pending: a batch larger than that could never fill and would stall. */
  processor_batch_size: integer.min(1).max(1000).default(512),
  processor_max_wait_ms: integer.min(1).max(10_000).default(20),
  /** Every replica's background jobs run on the one holding the job's lease; another takes over this long after it died. */
  job_lease_ttl_seconds: integer.min(3).max(3600).default(30),
  /** How often the replica holding the job sends every ruleset and budget state to NATS again (periods, expiries). */
  state_refresh_seconds: integer.min(1).max(86_400).default(60),
  /**
   * How long an envelope's hold (paused or ended) stays in the `svc_holds` bucket after it was last
   * written; a pause still in force is written again before then, an ending is not. A proxy drops
   * the holds it kept on disk once they are older.
   */
  hold_max_age_seconds: integer.min(600).max(7_776_000).default(604_800),
  /**
   * Usage events, proxies' violation de-duplication entries, checkpoints and execution contexts
   * older than this many days are removed by the control plane's `retention` job (0 keeps them for ever). At least 8, and longer
   * than nats_stream_max_age_seconds: an entry must outlive the event stream's max age (7 days by
   * default) in which a message can be delivered again. An existing stream keeps a larger max age
   * than the default, so the job also reads the one the server has, and keeps these records while
   * it is not shorter (control-plane/retention/retention-sweep.ts).
   */
  retention_days: integer
    .refine((days) => days === 0 || (days >= 8 && days <= 36_500), 'must be 0 (keep for ever) or 8 to 36500 days')
    .default(30),
  /** Time between the end of one retention sweep and the start of the next. */
  retention_interval_seconds: integer.min(1).max(86_400).default(3600),
  /** Records one retention transaction removes at most: small, so writers wait for it briefly. */
  retention_batch_size: integer.min(1).max(10_000).default(500),
  /** On SIGTERM: time for in-flight requests and the consumers' batches to finish before the process exits. */
  shutdown_grace_ms: integer.min(1_000).max(600_000).default(25_000),

  /** Loopback by default: a sidecar's agent shares the pod's loopback; anything wider is an open proxy. */
  proxy_host: z.string().default('127.0.0.1'),
  proxy_port: port.default(3128),
  /** Metrics and probes; a cluster sets the pod address so that the kubelet and Prometheus reach it. */
  proxy_admin_host: z.string().default('127.0.0.1'),
  proxy_admin_port: port.default(9464),
  /** Where the proxy writes, at start, the public roots plus its CA for the agent to trust. */
  proxy_trust_bundle_file: optionalString,
  tenant_id: optionalString,
  api_key: optionalString,
  budget_id: optionalString,
  /** Further budgets an agent may name in X-Svc-Budget-Id, comma-separated; budget_id is always allowed. */
  allowed_budget_ids: z.string().default(''),
  ca_cert_file: optionalString,
  ca_key_file: optionalString,
  upstream_overrides: z.string().default(''),
  upstream_ca_file: optionalString,

  /** Extra destinations intercepted (tool APIs); comma-separated `host[:port]` or `*.domain[:port]`, port 443 by default. */
  proxy_intercept_hosts: z.string().default(''),
  /** Hosts of OpenAI-compatible servers (vLLM, Ollama), metered with the OpenAI format; comma-separated. */
  proxy_compatible_hosts: z.string().default(''),
  /** Base paths under which those servers serve the OpenAI routes (`/v1/chat/completions`); comma-separated. */
  proxy_compatible_base_paths: z
    .string()
    .regex(/^\s*[^,?#\s]*(\s*,\s*[^,?#\s]*)*\s*$/, 'must be comma-separated paths such as /v1,/api/v1')
    .default('/v1'),
  /** A path on a provider host that is none of its routes: `meter` by the token estimate, or `refuse`. */
  proxy_unclassified_paths: z.enum(['meter', 'refuse']).default('meter'),
  /** How long the proxy keeps reading an answer whose client went away, to bill its real usage. */
  proxy_abort_drain_ms: integer.nonnegative().default(30_000),
  /**
   * How long a stream's body may stay open once the answer in it is complete ([DONE],
   * message_stop): past it the agent's response ends and the upstream connection is closed.
   */
  proxy_stream_end_wait_ms: integer.nonnegative().default(1000),
  /**
   * How often the proxy's LMDB store (outbox, ruleset cache) is flushed to disk. Commits land in
   * the page cache before an answer completes, so a killed process loses nothing; a machine crash
   * loses at most this interval. 0 flushes after every commit instead.
   */
  proxy_fsync_interval_ms: integer.nonnegative().default(100),
  /**
   * Events (and their bytes, as JSON) the proxy's outbox holds while the bus is away. Once full, a
   * call whose usage event would not fit is refused before anything is sent.
   */
  proxy_outbox_max_entries: integer.positive().default(100_000),
  proxy_outbox_max_bytes: integer.positive().default(256 * 1024 * 1024),
  /**
   * How long the proxy's outbox waits, once a call's event is written, before it publishes: the
   * events of the calls answered meanwhile go to NATS together, and the publishing work stays out
   * of the turns that serve calls. 0 publishes in the next turn of the event loop.
   */
  proxy_outbox_publish_delay_ms: integer.nonnegative().max(1_000).default(10),
  /**
   * Envelopes the proxy keeps in memory (one per execution id it has seen); beyond it the oldest
   * without a call in flight are forgotten (a later call with that execution id opens a new one).
   */
  proxy_envelope_cache_entries: integer.positive().default(10_000),
  /** Holds (paused or ended envelopes of the tenant, from `svc_holds`) the proxy keeps in memory. */
  proxy_hold_entries: integer.positive().default(100_000),
  /**
   * Largest upstream answer the proxy reads whole to govern it (a provider's whole answer, an MCP tools
   * list), and the largest rest of a stream drained after its client left.
   */
  proxy_response_limit_bytes: integer.positive().default(64 * 1024 * 1024),
  /** MCP servers governed by the proxy, `name=url` comma-separated: reverse route `/mcp/<name>`, intercepted on the URL's port. */
  proxy_mcp_servers: z.string().default(''),
  /** Ports any destination may be reached on through CONNECT or a forward request; others need a network:connect ALLOW. */
  proxy_egress_ports: z
    .string()
    .default('80,443')
    .refine(
      (v) => listed(v).every((p) => /^\d{1,5}$/.test(p) && Number(p) >= 1 && Number(p) <= 65535),
      'must be comma-separated ports such as 80,443',
    ),
  /** How long the proxy waits to connect to a blind CONNECT tunnel's destination; then the agent gets 502. */
  proxy_tunnel_connect_timeout_ms: integer.positive().default(10_000),
  /** How long an intercepted CONNECT may stay silent before its first bytes tell TLS from plain HTTP. */
  proxy_tunnel_first_bytes_timeout_ms: integer.positive().default(10_000),
  /** How long an agent's TLS handshake inside an intercepted CONNECT may take; then the tunnel closes. */
  proxy_tunnel_handshake_timeout_ms: integer.positive().default(10_000),
  /**
   * How long a CONNECT tunnel stays open with no byte either way. Above the 10 minutes the OpenAI
   * and Anthropic SDKs wait for an answer by default, so a slow call's SDK gives up first.
   */
  proxy_tunnel_idle_timeout_ms: integer.positive().default(900_000),
  /** Private, shared and loopback ranges: `allow` (cluster services, in-cluster MCP servers) or `deny`. */
  proxy_egress_private: z.enum(['allow', 'deny']).default('allow'),
  /** Further addresses the proxy never connects to. */
  proxy_egress_deny_cidrs: cidrList,
  /** Addresses the proxy may connect to even inside a refused range; they win over every refusal. */
  proxy_egress_allow_cidrs: cidrList,
  /** Provider keys the proxy sets on upstream requests (file preferred; a value is for local use). */
  provider_key_file_openai: optionalString,
  provider_key_file_anthropic: optionalString,
  provider_key_file_gemini: optionalString,
  provider_key_file_azure_openai: optionalString,
  provider_key_file_openai_compatible: optionalString,
  provider_key_openai: optionalString,
  provider_key_anthropic: optionalString,
  provider_key_gemini: optionalString,
  provider_key_azure_openai: optionalString,
  provider_key_openai_compatible: optionalString,
  /** How often key files are re-read (0: only on SIGHUP). */
  provider_key_reload_seconds: integer.nonnegative().default(60),
  /**
   * The built-in Semantic Judge reads each field (a prompt, a tool's arguments) up to this many
   * characters; a longer one resolves its SEMANTIC conditions fail-closed (docs/brain.md).
   */
  semantic_judge_max_text_chars: integer.min(1024).max(4_194_304).default(65_536),
  /** Destinations (`github.com`, `*.corp.example`) uploads to which the judge does not count as exfiltration. */
  semantic_judge_allowed_hosts: z.string().default(''),
  /** Which Semantic Judge answers SEMANTIC conditions: `builtin` (in process), `llm` (an endpoint) or `both`. */
  semantic_judge_mode: z.enum(['builtin', 'llm', 'both']).default('builtin'),
  /** Per-tenant choices that override semantic_judge_mode: `tenant=llm,other=both`, comma-separated. */
  semantic_judge_tenant_modes: z
    .string()
    .regex(
      /^\s*([^=,\s]+\s*=\s*(builtin|llm|both)(\s*,\s*[^=,\s]+\s*=\s*(builtin|llm|both))*)?\s*$/,
      'must be comma-separated tenant=builtin|llm|both',
    )
    .default(''),
  /** The LLM judge's OpenAI-compatible base URL (`https://api.openai.com/v1`, `http://vllm:8000/v1`). */
  semantic_judge_llm_url: z.url({ protocol: /^https?$/ }).optional(),
  semantic_judge_llm_model: z.string().min(1).default('gpt-4o-mini'),
  /** File holding the LLM judge endpoint's API key; none sent when unset (a local server). */
  semantic_judge_llm_key_file: optionalString,
  /** At most 4 s: the policy engine bounds any judge at 5 s and then fails closed whatever the mode. */
  semantic_judge_llm_timeout_ms: integer.min(50).max(4000).default(2000),
  /** A failed LLM judgement (timeout, error, unparseable answer, budget spent): `closed` or `open`. */
  semantic_judge_llm_fail_mode: z.enum(['closed', 'open']).default('closed'),
  semantic_judge_llm_cache_entries: integer.min(1).max(1_000_000).default(10_000),
  semantic_judge_llm_cache_ttl_seconds: integer
    .min(1)
    .max(7 * 86_400)
    .default(3600),
  /** What the LLM judge may spend per UTC day for each tenant (priced from the price table); 0 for no limit. */
  semantic_judge_llm_budget_usd_per_day: z.coerce.number().nonnegative().default(10),
  /** How often the Oracle looks at every active budget for a coming overrun (0: never). */
  oracle_interval_seconds: integer.min(0).max(86_400).default(60),
  /** The probability of an overrun at which `budgets.overrun_predicted` is raised. */
  oracle_overrun_threshold: z.coerce.number().gt(0).max(1).default(0.8),
  /** Earlier periods of a budget read for its usual intensity over a period. */
  oracle_lookback_periods: integer.min(0).max(31).default(5),
  /** Events read at most per prediction, newest first. */
  oracle_max_events: integer.min(100).max(1_000_000).default(20_000),
  /** How long an execution's allowed tool calls count for the Immune System's sequence rules. */
  proxy_sequence_window_seconds: integer.min(1).max(86_400).default(600),
  /** Executions whose recent tool calls the proxy remembers at once (16 calls each). */
  proxy_sequence_executions: integer.min(1).max(100_000).default(1024),
  /**
   * A call-rate or spend anomaly of an execution or of the whole sidecar (docs/brain.md): `off`,
   * `alert` (event, metric, log), `pause` (the execution's envelope, or for the sidecar every
   * envelope it serves, held until resumed) or `terminate` (the envelope, or the sidecar's every one).
   */
  proxy_anomaly_action: z.enum(['off', 'alert', 'pause', 'terminate']).default('alert'),
  /** How long a call of an envelope paused by `proxy_anomaly_action=pause` waits to be resumed before it is refused. */
  proxy_anomaly_hold_timeout_seconds: integer.min(1).max(86_400).default(300),
  /** Calls of paused envelopes held at once; a call over it is refused at once (SVC-SYS-9005). */
  proxy_anomaly_max_held: integer.min(1).max(100_000).default(100),
  /** The interval calls are counted in against the execution's own baseline (EWMA). */
  proxy_anomaly_interval_seconds: integer.min(1).max(3600).default(60),
  /** Standard deviations above the baseline that make an interval anomalous. */
  proxy_anomaly_z: z.coerce.number().min(1).max(100).default(4),
  /** Calls an interval needs at least before it can be anomalous. */
  proxy_anomaly_min_calls: integer.min(1).max(1_000_000).default(20),
  /** Spend (USD) an interval needs at least before it can be anomalous. */
  proxy_anomaly_min_spend_usd: z.coerce.number().positive().default(1),
  /**
   * Calls of the whole sidecar (all its executions) in one interval that are an anomaly whatever
   * the baseline: one a slow ramp trained up, or one high from the start. 1000 a minute is some
   * 17 governed calls a second held for a whole minute, tenfold what a busy agent makes.
   */
  proxy_anomaly_max_calls: integer.min(1).max(100_000_000).default(1000),
  /** The sidecar's spend (USD) in one interval that is an anomaly whatever the baseline. */
  proxy_anomaly_max_spend_usd: z.coerce.number().positive().default(100),
  /** Without any ruleset (none synced, none cached): `closed` refuses every governed call, `open` allows. */
  proxy_policy_fail_mode: z.enum(['closed', 'open']).default('closed'),
  /** What one budget may spend through this proxy while the control plane cannot grant a lease. */
  proxy_soft_limit_usd: z.coerce.number().nonnegative().default(1),
  proxy_soft_limit_tokens: integer.nonnegative().default(200_000),
  /** The slice of a budget asked for per lease request. */
  proxy_lease_usd: z.coerce.number().positive().default(1),
  proxy_lease_tokens: integer.positive().default(200_000),
  /** Renew in the background once less than this fraction of the lease is left. */
  proxy_lease_renew_below: z.coerce.number().gt(0).lt(1).default(0.5),
  proxy_lease_timeout_ms: integer.positive().default(2000),
  /** How long a call a REQUIRE_APPROVAL decision holds waits for the approval before it is refused. */
  proxy_approval_timeout_seconds: integer.min(1).max(86_400).default(300),
  /** Calls held for an approval at once; a call over it is refused at once (SVC-SYS-9005). */
  proxy_approval_max_held: integer.min(1).max(100_000).default(100),
  /**
   * Approvals one proxy opens in a minute at most; a call past it is refused at once (SVC-SYS-9005):
   * an agent that sends calls needing approval and leaves at once would otherwise announce
   * approvals to the reviewers without end.
   */
  proxy_approval_opens_per_minute: integer.min(1).max(100_000).default(60),
  /**
   * The decoded bytes of the requests held at once, for approvals and for paused envelopes
   * together; a call whose request would pass it is refused at once (SVC-SYS-9005).
   */
  proxy_held_max_bytes: integer.positive().default(64 * 1024 * 1024),
  /**
   * How often a held call asks the control plane how its approval stands (and how long one ask
   * may take): covers a decision signal missed while NATS or the control plane was away.
   */
  proxy_approval_recheck_ms: integer.min(100).max(600_000).default(5000),
  /** How long the first call on a budget never seen before may wait for its first lease. */
  proxy_lease_first_wait_ms: integer.nonnegative().default(500),
  /** Largest request body the proxy reads to govern a call, also once decompressed. */
  proxy_body_limit_bytes: integer.positive().default(32 * 1024 * 1024),
  /** Largest single stream event (SSE event, streamed JSON array element) held while it completes. */
  proxy_stream_event_limit_bytes: integer.positive().default(8 * 1024 * 1024),
  /**
   * Input tokens reserved, and charged when the provider reports no usage, for context a request
   * refers to on the provider's side (Responses `previous_response_id`, `conversation`, a stored
   * `prompt`; Gemini `cachedContent`), which the proxy cannot count.
   */
  proxy_server_context_tokens: integer.nonnegative().default(128_000),
  /** Distinct model labels per metric before further models are counted as `other`. */
  proxy_model_label_cap: integer.positive().default(50),
  /**
   * Quiet time after the start or the last governed request before the proxy runs one
   * heap-shrinking collection, which gives the memory the start or a burst of calls left behind
   * back to the system (it holds the event loop for up to about 100 ms, hence only when idle); 0
   * turns it off. Needs node's --expose-gc, which the sidecar's command carries.
   */
  proxy_idle_gc_ms: integer.nonnegative().default(5_000),
  /** The injection webhook (`npm run injector`): HTTPS port, serving certificate, sidecar template. */
  injector_port: port.default(8443),
  injector_tls_cert_file: optionalString,
  injector_tls_key_file: optionalString,
  injector_template_file: optionalString,

  /**
   * Price of a model missing from the table, never zero: `max_known` (the highest rates known for
   * its provider), `fixed:<input>:<output>` USD per million tokens, or `deny` (the proxy refuses the call).
   */
  unknown_model_price: z
    .string()
    .regex(/^(max_known|deny|fixed:\d+(\.\d+)?:\d+(\.\d+)?)$/, 'must be max_known, deny or fixed:<input>:<output>')
    .default('max_known'),
});

export const ConfigSchema = settings.superRefine((config, ctx) => {
  // Without both, a token the identity provider signed for any other application would pass.
  if (config.jwt_jwks_url !== undefined) {
    for (const key of ['jwt_issuer', 'jwt_audience'] as const) {
      if (config[key] === undefined)
        ctx.addIssue({ code: 'custom', path: [key], message: 'required when SVC_JWT_JWKS_URL is set' });
    }
  }
  // Else a request within the body limit could never be held, and would be refused as if the proxy were busy.
  if (config.proxy_held_max_bytes < config.proxy_body_limit_bytes) {
    ctx.addIssue({
      code: 'custom',
      path: ['proxy_held_max_bytes'],
      message: `must be at least SVC_PROXY_BODY_LIMIT_BYTES (${config.proxy_body_limit_bytes})`,
    });
  }
  // Else a message within the gRPC message limit could never be received.
  if (config.grpc_max_received_bytes < config.grpc_max_message_bytes) {
    ctx.addIssue({
      code: 'custom',
      path: ['grpc_max_received_bytes'],
      message: `must be at least SVC_GRPC_MAX_MESSAGE_BYTES (${config.grpc_max_message_bytes})`,
    });
  }
  // A redelivered event must still find its de-duplication entry, or it counts twice.
  const maxAge = config.nats_stream_max_age_seconds;
  if (config.retention_days > 0 && maxAge !== undefined && maxAge >= config.retention_days * 86_400) {
    ctx.addIssue({
      code: 'custom',
      path: ['nats_stream_max_age_seconds'],
      message: `must be less than SVC_RETENTION_DAYS (${config.retention_days} days = ${config.retention_days * 86_400} s)`,
    });
  }
});

export type Config = z.infer<typeof ConfigSchema>;
export type ConfigKey = keyof Config;

export const CONFIG_KEYS = Object.keys(ConfigSchema.shape) as ConfigKey[];

export function envName(key: ConfigKey): string {
  return `SVC_${key.toUpperCase()}`;
}
