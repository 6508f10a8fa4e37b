-- Room on each page for the new version of a row the event processor charges: PostgreSQL then
-- updates it in place (a heap-only tuple) instead of on another page with a new entry in each of
-- the table's indexes. Applies to pages written from now on.
ALTER TABLE envelopes SET (fillfactor = 80);
ALTER TABLE envelope_model_costs SET (fillfactor = 80);
ALTER TABLE budgets SET (fillfactor = 80);
