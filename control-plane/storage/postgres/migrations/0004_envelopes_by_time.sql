-- Envelopes newest first (the traces of the /api/v1 guide paths), read from an index in that
-- order however many envelopes the tenant has: their creation time as a column of its own. The
-- existing rows take it from their document; a document holding an escaped U+0000, which
-- PostgreSQL's JSON functions refuse, is read with that escape replaced by a space's (the time is
-- a top-level field no such character is in).
ALTER TABLE envelopes ADD COLUMN created_at text COLLATE "C";
UPDATE envelopes SET created_at = replace(doc::text, '\u0000', '\u0020')::json ->> 'created_at';
ALTER TABLE envelopes ALTER COLUMN created_at SET NOT NULL;
CREATE INDEX envelopes_by_time ON envelopes (tenant_id, created_at, envelope_id);
