-- Checkpoints and execution contexts (spec 2.7, 4.6; docs/grpc.md, "Checkpoints").

-- The highest version each execution ever had: a save with auto_version takes the next one in
-- one statement, so concurrent saves of an execution on any replica get distinct versions, and a
-- pruned or deleted version number is never given again.
CREATE TABLE checkpoint_heads (
  tenant_id text COLLATE "C" NOT NULL,
  execution_id text COLLATE "C" NOT NULL,
  version integer NOT NULL,
  PRIMARY KEY (tenant_id, execution_id)
);

-- One row per version; the columns are what queries filter and order on, `doc` the whole record.
CREATE TABLE checkpoints (
  tenant_id text COLLATE "C" NOT NULL,
  execution_id text COLLATE "C" NOT NULL,
  version integer NOT NULL,
  checkpoint_id text COLLATE "C" NOT NULL,
  envelope_id text COLLATE "C" NOT NULL,
  type text,
  framework_type text COLLATE "C",
  cost_snapshot_usd double precision NOT NULL,
  size_bytes bigint NOT NULL,
  tags jsonb NOT NULL,
  created_at text COLLATE "C" NOT NULL,
  deleted_at text,
  doc json NOT NULL,
  PRIMARY KEY (tenant_id, execution_id, version)
);

CREATE INDEX checkpoints_by_id ON checkpoints (tenant_id, checkpoint_id, version);
CREATE INDEX checkpoints_by_time ON checkpoints (tenant_id, created_at, version, execution_id);

CREATE TABLE execution_contexts (
  tenant_id text COLLATE "C" NOT NULL,
  execution_id text COLLATE "C" NOT NULL,
  version bigint NOT NULL,
  doc json NOT NULL,
  PRIMARY KEY (tenant_id, execution_id)
);
