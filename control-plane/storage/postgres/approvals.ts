import type { Approval } from '../../../core/policy/index.ts';
import { taken } from '../conflict.ts';
import type { ApprovalDecisionFields, ApprovalListFilter, ApprovalRepository, Page, PageRequest } from '../storage.ts';
import { pageOf, pageStart } from './pages.ts';
import type { Sql } from './sql.ts';

interface Row {
  approval_id: string;
  doc: Approval;
}

export class PgApprovals implements ApprovalRepository {
  readonly #sql: Sql;

  constructor(sql: Sql) {
    this.#sql = sql;
  }

  async get(tenant: string, approvalId: string): Promise<Approval | undefined> {
    const { rows } = await this.#sql.query<Row>('SELECT doc FROM approvals WHERE tenant_id = $1 AND approval_id = $2', [
      tenant,
      approvalId,
    ]);
    return rows[0]?.doc;
  }

  async list(tenant: string, filter: ApprovalListFilter, request?: PageRequest): Promise<Page<Approval>> {
    const { size, after } = pageStart<string>(request, 'string');
    // Through approvals_by_status when a status is given (migration 0008).
    const { rows } = await this.#sql.query<Row>(
      `SELECT approval_id, doc FROM approvals WHERE tenant_id = $1 AND ($2::text IS NULL OR approval_id > $2)
         AND ($3::text IS NULL OR doc->>'status' = $3)
       ORDER BY approval_id LIMIT $4`,
      [tenant, after, filter.status ?? null, size + 1],
    );
    return pageOf(
      rows,
      size,
      (r) => r.approval_id,
      (r) => r.doc,
    );
  }

  async insert(tenant: string, approval: Approval): Promise<void> {
    const { rowCount } = await this.#sql.query(
      'INSERT INTO approvals (tenant_id, approval_id, doc) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING',
      [tenant, approval.approval_id, JSON.stringify(approval)],
    );
    if (rowCount === 0)
      throw taken('approval_id', approval.approval_id, `approval ${approval.approval_id} already exists`);
  }

  async decide(tenant: string, approvalId: string, decision: ApprovalDecisionFields): Promise<Approval | undefined> {
    // The row lock makes a second reviewer wait, then read the decided approval and stand back.
    const { rows } = await this.#sql.query<Row>(
      'SELECT doc FROM approvals WHERE tenant_id = $1 AND approval_id = $2 FOR UPDATE',
      [tenant, approvalId],
    );
    const stored = rows[0]?.doc;
    if (stored === undefined || stored.status !== 'PENDING') return undefined;
    const { review_note: note, ...fields } = decision;
    const decided: Approval = { ...stored, ...fields, ...(note === undefined ? {} : { review_note: note }) };
    await this.#sql.query('UPDATE approvals SET doc = $3 WHERE tenant_id = $1 AND approval_id = $2', [
      tenant,
      approvalId,
      JSON.stringify(decided),
    ]);
    return decided;
  }
}
