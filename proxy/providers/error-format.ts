import { ERROR_CATALOGUE, GRPC, type SvcCode } from '../../core/errors/index.ts';
import type { ProviderAdapter } from './adapter.ts';
import { sseErrorFrame } from './sse-framer.ts';

/** The message agents see: the SVC code first, so SDK error strings carry it. */
export function codedMessage(svcCode: SvcCode, message: string): string {
  return `${svcCode}: ${message}`;
}

export function errorStatus(svcCode: SvcCode, status?: number): number {
  return status ?? ERROR_CATALOGUE[svcCode].http;
}

/**
 * The OpenAI and Anthropic SDKs obey `x-should-retry` before their own status rules, so a
 * terminal refusal (a denial, an exhausted budget) is raised once instead of retried with
 * backoff. Recoverable codes leave the decision to the SDK.
 */
export function errorHeaders(svcCode: SvcCode): Record<string, string> {
  const headers: Record<string, string> = { 'content-type': 'application/json', 'x-svc-error-code': svcCode };
  if (!ERROR_CATALOGUE[svcCode].retryable) headers['x-should-retry'] = 'false';
  return headers;
}

const GRPC_NAMES = new Map<number, string>(Object.entries(GRPC).map(([name, code]) => [code, name]));

/** Google's canonical status name for a code (Gemini puts it in `error.status`). */
export function grpcStatusName(svcCode: SvcCode): string {
  return GRPC_NAMES.get(ERROR_CATALOGUE[svcCode].grpc) ?? 'UNKNOWN';
}

/** How one provider family words an error: its JSON payload, and the SSE event name that carries it in a stream. */
export interface ErrorFormat {
  readonly streamEventName: string | undefined;
  payload(svcCode: SvcCode, message: string, status: number): unknown;
}

/** The stream form of an error is sent mid-stream, where the status line is long gone: the code's own status is used. */
export function streamErrorPayload(format: ErrorFormat, svcCode: SvcCode, message: string): unknown {
  return format.payload(svcCode, message, errorStatus(svcCode));
}

/** An adapter's two error answers, built one way for every provider family from its format. */
export function errorReplies(format: ErrorFormat): Pick<ProviderAdapter, 'errorResponse' | 'streamErrorEvent'> {
  return {
    errorResponse(svcCode, message, status) {
      const s = errorStatus(svcCode, status);
      return { status: s, headers: errorHeaders(svcCode), body: JSON.stringify(format.payload(svcCode, message, s)) };
    },
    streamErrorEvent(svcCode, message) {
      return sseErrorFrame(format.streamEventName, streamErrorPayload(format, svcCode, message));
    },
  };
}
