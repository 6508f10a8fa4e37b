-- Retention of lease records: a report number carries when it was last counted, and numbers
-- counted before the retention cutoff go, as do leases expired before it. Numbers counted before
-- this migration are taken as counted now.
ALTER TABLE lease_reports ADD COLUMN counted_at timestamptz NOT NULL DEFAULT now();
ALTER TABLE lease_reports ALTER COLUMN counted_at DROP DEFAULT;
CREATE INDEX lease_reports_counted ON lease_reports (tenant_id, counted_at);
CREATE INDEX leases_expiry ON leases (tenant_id, expires_at);
