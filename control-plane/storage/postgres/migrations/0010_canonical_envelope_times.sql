-- Envelope times in the one form the control plane now keeps (UTC, three digits of a second,
-- digits past the millisecond cut, not rounded): envelopes are listed by the text of their
-- creation time, which for times written with an offset or another number of digits was not
-- time order. A time PostgreSQL cannot read as a date-time of the years 0001-9999 in UTC (year
-- 0000 among them) is left as written.
CREATE FUNCTION pg_temp.canonical_time(t text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  parts text[] := regexp_match(t, '^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$');
  instant timestamptz;
BEGIN
  IF parts IS NULL OR t ~ '^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$' THEN
    RETURN t;
  END IF;
  instant := (parts[1] || '.' || rpad(left(coalesce(parts[2], ''), 3), 3, '0') || parts[3])::timestamptz;
  IF instant < '0001-01-01T00:00:00Z' OR instant >= '10000-01-01T00:00:00Z' THEN
    RETURN t;
  END IF;
  RETURN to_char(instant AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');
EXCEPTION WHEN invalid_datetime_format OR datetime_field_overflow THEN
  RETURN t;
END
$$;

-- `t` with the last `find` in it replaced by `replacement` (unchanged when there is none). The
-- envelope's own created_at is the last of its document: metadata, which may hold one, comes first.
CREATE FUNCTION pg_temp.replace_last(t text, find text, replacement text) RETURNS text LANGUAGE sql AS $$
  SELECT CASE WHEN strpos(t, find) = 0 THEN t
    ELSE reverse(overlay(reverse(t) PLACING reverse(replacement) FROM strpos(reverse(t), reverse(find)) FOR length(find)))
  END
$$;

-- The document is edited as text: one holding an escaped U+0000, which jsonb and PostgreSQL's
-- JSON functions refuse, is rewritten like any other. Pages are keyed by the document's creation
-- time, so the column changes only where the document did.
WITH old AS (
  SELECT tenant_id, envelope_id, doc::text AS doc, created_at, pg_temp.canonical_time(created_at) AS canonical
  FROM envelopes
  WHERE created_at !~ '^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$'
    OR updated_at !~ '^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$'
    OR completed_at !~ '^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$'
), edited AS (
  SELECT tenant_id, envelope_id, doc AS before, canonical,
    pg_temp.replace_last(doc, '"created_at":"' || created_at || '"', '"created_at":"' || canonical || '"') AS doc
  FROM old
)
UPDATE envelopes e SET
  doc = d.doc::json,
  created_at = CASE WHEN d.doc <> d.before THEN d.canonical ELSE e.created_at END,
  updated_at = pg_temp.canonical_time(e.updated_at),
  completed_at = pg_temp.canonical_time(e.completed_at)
FROM edited d
WHERE e.tenant_id = d.tenant_id AND e.envelope_id = d.envelope_id;

DROP FUNCTION pg_temp.replace_last(text, text, text);
DROP FUNCTION pg_temp.canonical_time(text);
