-- The keys one key created, for revoking them with it.
CREATE INDEX api_keys_by_creator ON api_keys ((doc->>'created_by')) WHERE doc->>'created_by' IS NOT NULL;
