/** Subjects of spec 6.2, namespaced by tenant. */
export const subjects = {
  envelopeCreated: (tenant: string) => `svc.${tenant}.envelopes.created`,
  envelopeStarted: (tenant: string) => `svc.${tenant}.envelopes.started`,
  envelopeCompleted: (tenant: string) => `svc.${tenant}.envelopes.completed`,
  envelopeFailed: (tenant: string) => `svc.${tenant}.envelopes.failed`,
  envelopeTerminated: (tenant: string) => `svc.${tenant}.envelopes.terminated`,
  /** `eventType` is the dotted event type of the record (`llm.call`, `tool.invoke`, `checkpoint.saved`). */
  event: (tenant: string, eventType: string) => `svc.${tenant}.events.${eventType}`,
  budgetWarning: (tenant: string) => `svc.${tenant}.budgets.warning`,
  budgetExceeded: (tenant: string) => `svc.${tenant}.budgets.exceeded`,
  budgetDeleted: (tenant: string) => `svc.${tenant}.budgets.deleted`,
  /** The Oracle expects a budget to run over before its period ends. */
  budgetOverrunPredicted: (tenant: string) => `svc.${tenant}.budgets.overrun_predicted`,
  policyViolation: (tenant: string) => `svc.${tenant}.policies.violation`,
  /** Approvals (spec 3.4) travel in the policies family, so the event stream keeps them. */
  approvalRequested: (tenant: string) => `svc.${tenant}.policies.approval.requested`,
  approvalDecided: (tenant: string) => `svc.${tenant}.policies.approval.decided`,
  systemHealth: 'svc.system.health',
  systemMetrics: 'svc.system.metrics',
  /** Failed authentications one control-plane replica announces to the others (docs/security.md). */
  authFailures: 'svc.system.auth-failures',
  /** Requests per credential one control-plane replica announces to the others (docs/deployment.md). */
  requestCounts: 'svc.system.request-counts',
} as const;

/** NATS-style subject matching: `*` matches one token, `>` one or more trailing tokens. */
export function subjectMatches(pattern: string, subject: string): boolean {
  return subjectMatcher(pattern)(subject);
}

/**
 * `subjectMatches` for one pattern, split once: a scan of the log tests it against every message,
 * and reads each subject's tokens in place rather than splitting it.
 */
export function subjectMatcher(pattern: string): (subject: string) => boolean {
  const tokens = pattern.split('.');
  return (subject) => {
    // Where the subject's next token begins; past its end once it has no more.
    let start = 0;
    for (const token of tokens) {
      if (start > subject.length) return false;
      if (token === '>') return true;
      const dot = subject.indexOf('.', start);
      const end = dot === -1 ? subject.length : dot;
      if (token !== '*' && (end - start !== token.length || !subject.startsWith(token, start))) return false;
      start = end + 1;
    }
    return start > subject.length;
  };
}

/** The longest tenant id (`TenantIdSchema`). */
const MAX_TENANT_LENGTH = 64;

/** Whether the character is one a tenant id may hold: a letter, a digit, `_` or `-`. */
function isTenantChar(c: number): boolean {
  return (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || (c >= 48 && c <= 57) || c === 95 || c === 45;
}

/**
 * The tenant of `svc.<tenant>.…` when it is a tenant id (as `TenantIdSchema` has it), else
 * undefined. Read in place: the event processor asks it of every message, where splitting the
 * subject and a schema's regular expression were a cost of their own.
 */
export function subjectTenantId(subject: string): string | undefined {
  const start = subject.indexOf('.') + 1;
  if (start === 0) return undefined;
  let end = start;
  while (end < subject.length && end - start <= MAX_TENANT_LENGTH && isTenantChar(subject.charCodeAt(end))) end++;
  if (end === start || end - start > MAX_TENANT_LENGTH) return undefined;
  if (end < subject.length && subject.charCodeAt(end) !== 46) return undefined;
  return subject.slice(start, end);
}

/**
 * The families of spec 6.2 that the event stream stores. Leases (`svc.<tenant>.leases.…`) and
 * signals (`svc.<tenant>.signals.…`) are plain subjects outside it.
 */
export const STREAM_SUBJECTS = ['svc.*.envelopes.>', 'svc.*.events.>', 'svc.*.budgets.>', 'svc.*.policies.>'] as const;

/**
 * Where the bus copies a message it set aside: `deadletter.<original subject>`, outside every
 * family of the event stream (no consumer of the product reads it) and outside `svc.>` (no proxy
 * credential may publish there).
 */
export const DEAD_LETTER_SUBJECTS = 'deadletter.>';

export function deadLetterSubject(subject: string): string {
  return `deadletter.${subject}`;
}

/** Whether every subject matching `pattern` also matches `filter` (both NATS-style). */
export function patternWithin(pattern: string, filter: string): boolean {
  const p = pattern.split('.');
  const f = filter.split('.');
  for (let i = 0; i < f.length; i++) {
    const token = p[i];
    if (f[i] === '>') return token !== undefined;
    if (token === undefined || token === '>') return false;
    if (f[i] !== '*' && token !== f[i]) return false;
  }
  return p.length === f.length;
}

/** Whether a subject or pattern lies inside one family of the event stream. */
export function inEventStream(pattern: string): boolean {
  return STREAM_SUBJECTS.some((family) => patternWithin(pattern, family));
}
