-- The last report of spend counted per lease holder and budget: a renewal sent again after its
-- answer was lost repeats its report's number, and a number counted already adds no spend. A
-- holder's row outlives its leases, as a report can arrive after them.
CREATE TABLE lease_reports (
  tenant_id text COLLATE "C" NOT NULL,
  budget_id text COLLATE "C" NOT NULL,
  holder text COLLATE "C" NOT NULL,
  seq bigint NOT NULL,
  PRIMARY KEY (tenant_id, budget_id, holder)
);
