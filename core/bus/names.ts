import { SvcError } from '../errors/index.ts';
import { inEventStream } from './subjects.ts';

const KEY = /^[-/_=a-zA-Z0-9]+(\.[-/_=a-zA-Z0-9]+)*$/;
const TOKEN = /^[^.\s*>]+$/;
const DURABLE = /^[-_a-zA-Z0-9]+$/;

function invalid(field: string, value: string, description: string): SvcError {
  return new SvcError('SVC-SYS-9002', `invalid ${field} '${value}': ${description}`, { field, value }, [
    { field, description },
  ]);
}

/** A key-value key: `.`-separated tokens that JetStream accepts as a subject suffix. */
export function assertKey(key: string): void {
  if (!KEY.test(key)) throw invalid('key', key, "must be '.'-separated tokens of letters, digits, '-', '_', '=', '/'");
}

/** A subscription pattern or key filter: tokens, `*` for one token, `>` only as the last token. */
export function assertPattern(pattern: string, field = 'pattern'): void {
  const tokens = pattern.split('.');
  const ok = tokens.every(
    (token, i) => token === '*' || (token === '>' && i === tokens.length - 1) || TOKEN.test(token),
  );
  if (!ok) throw invalid(field, pattern, "must be '.'-separated tokens, '*' for one token, '>' only last");
}

/** A concrete subject to publish to: no wildcards. */
export function assertSubject(subject: string): void {
  if (!subject.split('.').every((token) => TOKEN.test(token))) {
    throw invalid('subject', subject, "must be '.'-separated tokens without wildcards or spaces");
  }
}

/** A durable or bucket name: JetStream forbids `.`, wildcards and spaces in them. */
export function assertName(field: string, name: string): void {
  if (!DURABLE.test(name)) throw invalid(field, name, "must be letters, digits, '-' and '_' only");
}

/**
 * Event subjects and patterns found valid, so that the few a process publishes on every call are
 * checked once: the check splits and matches each against every stream family. Bounded: emptied
 * when full.
 */
const validEventSubjects = { subject: new Set<string>(), pattern: new Set<string>() };
const VALID_SUBJECTS_KEPT = 4096;

/**
 * A subject or pattern of the event bus: it must fall inside one stream family, since a JetStream
 * consumer on nats-server 2.9 filters on one subset of one stream subject.
 */
export function assertEventSubject(field: 'subject' | 'pattern', value: string): void {
  const valid = validEventSubjects[field];
  if (valid.has(value)) return;
  if (field === 'subject') assertSubject(value);
  else assertPattern(value);
  if (!inEventStream(value))
    throw invalid(field, value, 'must lie within svc.<tenant>.envelopes|events|budgets|policies.>');
  if (valid.size >= VALID_SUBJECTS_KEPT) valid.clear();
  valid.add(value);
}
