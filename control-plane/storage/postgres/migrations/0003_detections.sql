-- The Immune System's detections (docs/brain.md): one row per detection, listed newest first by
-- sort_key (the ISO-8601 detection time, '/', the detection id), which is also the page token.
CREATE TABLE detections (
  tenant_id text COLLATE "C" NOT NULL,
  detection_id text COLLATE "C" NOT NULL,
  sort_key text COLLATE "C" NOT NULL,
  kind text COLLATE "C" NOT NULL,
  envelope_id text COLLATE "C",
  execution_id text COLLATE "C",
  doc json NOT NULL,
  PRIMARY KEY (tenant_id, detection_id)
);
CREATE INDEX detections_by_time ON detections (tenant_id, sort_key);
CREATE INDEX detections_by_envelope ON detections (tenant_id, envelope_id, sort_key);
CREATE INDEX detections_by_execution ON detections (tenant_id, execution_id, sort_key);
