-- The control plane's records on PostgreSQL (docs/storage.md). Ids are compared in "C" collation
-- so that lists come in the byte order of their UTF-8 ids, the order LMDB keeps. A record is kept
-- as the JSON it was written as (`doc`, type json: keys keep their order), with the fields that
-- change (counters, status) in columns of their own, changed by single statements.

CREATE TABLE tenants (
  tenant_id text COLLATE "C" PRIMARY KEY,
  doc json NOT NULL
);

CREATE TABLE webhook_secrets (
  tenant_id text COLLATE "C" PRIMARY KEY,
  doc json NOT NULL
);

CREATE TABLE envelopes (
  tenant_id text COLLATE "C" NOT NULL,
  envelope_id text COLLATE "C" NOT NULL,
  budget_id text COLLATE "C",
  status text NOT NULL,
  status_reason text,
  updated_at text NOT NULL,
  completed_at text,
  -- Whether the status is final: the live list of a budget leaves these out.
  ended boolean NOT NULL,
  tokens_input bigint NOT NULL,
  tokens_output bigint NOT NULL,
  cost_micros bigint NOT NULL,
  llm_calls bigint NOT NULL,
  tool_calls bigint NOT NULL,
  -- The envelope as inserted; the columns above override what changes.
  doc json NOT NULL,
  PRIMARY KEY (tenant_id, envelope_id)
);
CREATE INDEX envelopes_by_status ON envelopes (tenant_id, status, envelope_id);
CREATE INDEX envelopes_by_budget ON envelopes (tenant_id, budget_id, envelope_id);
CREATE INDEX envelopes_live_by_budget ON envelopes (tenant_id, budget_id, envelope_id) WHERE NOT ended;

-- Per-model cost totals of an envelope, in the order their models were first charged.
CREATE TABLE envelope_model_costs (
  tenant_id text COLLATE "C" NOT NULL,
  envelope_id text COLLATE "C" NOT NULL,
  model_id text NOT NULL,
  position integer NOT NULL,
  input_tokens bigint NOT NULL,
  output_tokens bigint NOT NULL,
  cost_micros bigint NOT NULL,
  call_count bigint NOT NULL,
  PRIMARY KEY (tenant_id, envelope_id, model_id),
  FOREIGN KEY (tenant_id, envelope_id) REFERENCES envelopes (tenant_id, envelope_id) ON DELETE CASCADE
);

-- Which envelope has an execution id (unique per tenant).
CREATE TABLE executions (
  tenant_id text COLLATE "C" NOT NULL,
  execution_id text COLLATE "C" NOT NULL,
  envelope_id text COLLATE "C" NOT NULL,
  PRIMARY KEY (tenant_id, execution_id)
);

CREATE TABLE budgets (
  tenant_id text COLLATE "C" NOT NULL,
  budget_id text COLLATE "C" NOT NULL,
  updated_at text NOT NULL,
  period_start text NOT NULL,
  period_end text,
  tokens_input bigint NOT NULL,
  tokens_output bigint NOT NULL,
  cost_micros bigint NOT NULL,
  executions bigint NOT NULL,
  llm_calls bigint NOT NULL,
  tool_calls bigint NOT NULL,
  alerts_fired integer[] NOT NULL,
  -- The budget as inserted; usage and updated_at live in the columns above.
  doc json NOT NULL,
  PRIMARY KEY (tenant_id, budget_id)
);

CREATE TABLE policies (
  tenant_id text COLLATE "C" NOT NULL,
  policy_id text COLLATE "C" NOT NULL,
  doc json NOT NULL,
  PRIMARY KEY (tenant_id, policy_id)
);

CREATE TABLE ruleset_versions (
  tenant_id text COLLATE "C" PRIMARY KEY,
  version bigint NOT NULL
);

-- Key ids are unique across tenants: authentication finds the tenant from the key id.
CREATE TABLE api_keys (
  key_id text COLLATE "C" PRIMARY KEY,
  tenant_id text COLLATE "C" NOT NULL,
  revoked_at text,
  doc json NOT NULL
);
CREATE INDEX api_keys_by_tenant ON api_keys (tenant_id, key_id);

CREATE TABLE approvals (
  tenant_id text COLLATE "C" NOT NULL,
  approval_id text COLLATE "C" NOT NULL,
  doc json NOT NULL,
  PRIMARY KEY (tenant_id, approval_id)
);

-- The hash chain: appends of a tenant hold a transaction advisory lock on the tenant while they
-- read the head and write after it, so that concurrent writers on any replica extend one chain.
CREATE TABLE audit_heads (
  tenant_id text COLLATE "C" PRIMARY KEY,
  seq bigint NOT NULL,
  hash text NOT NULL
);

CREATE TABLE audit_records (
  tenant_id text COLLATE "C" NOT NULL,
  seq bigint NOT NULL,
  action text NOT NULL,
  resource_type text NOT NULL,
  actor_id text NOT NULL,
  doc json NOT NULL,
  PRIMARY KEY (tenant_id, seq)
);
CREATE INDEX audit_records_by_action ON audit_records (tenant_id, action, seq);
CREATE INDEX audit_records_by_resource_type ON audit_records (tenant_id, resource_type, seq);
CREATE INDEX audit_records_by_actor ON audit_records (tenant_id, actor_id, seq);

-- Usage events; `arrival` orders them (newest first in lists).
CREATE TABLE events (
  arrival bigint GENERATED ALWAYS AS IDENTITY,
  tenant_id text COLLATE "C" NOT NULL,
  event_id text COLLATE "C" NOT NULL,
  envelope_id text COLLATE "C" NOT NULL,
  event_type text COLLATE "C" NOT NULL,
  doc json NOT NULL,
  PRIMARY KEY (tenant_id, event_id)
);
CREATE INDEX events_by_arrival ON events (tenant_id, arrival);
CREATE INDEX events_by_envelope ON events (tenant_id, envelope_id, arrival);
CREATE INDEX events_by_type ON events (tenant_id, event_type, arrival);

CREATE TABLE leases (
  tenant_id text COLLATE "C" NOT NULL,
  budget_id text COLLATE "C" NOT NULL,
  lease_id text COLLATE "C" NOT NULL,
  expires_at timestamptz NOT NULL,
  tokens bigint,
  micros bigint,
  doc json NOT NULL,
  PRIMARY KEY (tenant_id, budget_id, lease_id)
);

-- Spend proxies reported out of leases and spend applied to the budget, in its current period.
CREATE TABLE lease_spend (
  tenant_id text COLLATE "C" NOT NULL,
  budget_id text COLLATE "C" NOT NULL,
  period_start text NOT NULL,
  reported_tokens bigint NOT NULL,
  reported_micros bigint NOT NULL,
  applied_tokens bigint NOT NULL,
  applied_micros bigint NOT NULL,
  PRIMARY KEY (tenant_id, budget_id)
);

CREATE TABLE processed_messages (
  tenant_id text COLLATE "C" NOT NULL,
  scope text COLLATE "C" NOT NULL,
  message_id text COLLATE "C" NOT NULL,
  processed_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant_id, scope, message_id)
);

CREATE TABLE job_leases (
  name text PRIMARY KEY,
  holder text NOT NULL,
  expires_at timestamptz NOT NULL
);

-- Bus events waiting for the bus, appended in the transaction of the change they announce.
CREATE TABLE outbox (
  key bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  event json NOT NULL,
  bytes integer NOT NULL
);
