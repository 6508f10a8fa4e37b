import { z } from 'zod';
import { ERROR_CATALOGUE, SvcError, isSvcError, type SvcCode } from '../errors/index.ts';

const codes = Object.keys(ERROR_CATALOGUE) as [SvcCode, ...SvcCode[]];

/** What a replier sends back: the handler's result, or the SvcError it threw. */
const replySchema = z.union([
  z.object({ ok: z.literal(true), data: z.unknown() }),
  z.object({
    ok: z.literal(false),
    error: z.object({ code: z.enum(codes), message: z.string(), details: z.record(z.string(), z.unknown()) }),
  }),
]);
export type ReplyEnvelope = z.infer<typeof replySchema>;

/** Runs a reply handler and wraps its outcome; an error that is not an SvcError becomes SVC-SYS-9007. */
export async function runReplyHandler(handler: () => Promise<unknown>): Promise<ReplyEnvelope> {
  try {
    return { ok: true, data: await handler() };
  } catch (error) {
    return failedReply(
      isSvcError(error) ? error : new SvcError('SVC-SYS-9007', 'reply handler failed', { cause: String(error) }),
    );
  }
}

/** The reply carrying `error`, rethrown with its code at the requester. */
export function failedReply(error: SvcError): ReplyEnvelope {
  return { ok: false, error: { code: error.code, message: error.message, details: error.details } };
}

/** Unwraps a reply on the requesting side: the result, or the replier's SvcError rethrown. */
export function unwrapReply(subject: string, payload: unknown): unknown {
  const parsed = replySchema.safeParse(payload);
  if (!parsed.success) throw new SvcError('SVC-SYS-9007', `malformed reply on ${subject}`, { subject });
  if (parsed.data.ok) return parsed.data.data;
  const { code, message, details } = parsed.data.error;
  throw new SvcError(code, message, details);
}

export function noResponder(subject: string, timeoutMs: number): SvcError {
  return new SvcError('SVC-SYS-9001', `no reply on ${subject} within ${timeoutMs} ms`, {
    subject,
    timeout_ms: timeoutMs,
  });
}
