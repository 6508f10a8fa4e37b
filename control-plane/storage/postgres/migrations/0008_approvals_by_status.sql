-- One status's approvals (the pending ones) in id order, without reading those decided before them.
CREATE INDEX approvals_by_status ON approvals (tenant_id, (doc->>'status'), approval_id);
