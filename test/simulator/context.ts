import type { ServerResponse } from 'node:http';
import type { TokenUsage } from '../../core/metering/prices.ts';
import type { ProviderAdapter } from '../../proxy/providers/adapter.ts';
import type { ReplyPlan } from './plan.ts';
import type { StreamWriter } from './sse-writer.ts';

export interface SimContext {
  res: ServerResponse;
  plan: ReplyPlan;
  body: Record<string, unknown>;
  /** Formats injected errors exactly as the proxy would. */
  adapter: ProviderAdapter;
  stream: boolean;
  query: URLSearchParams;
}

/** A simulated endpoint answers and reports the usage it put on the wire. */
export type SimHandler = (ctx: SimContext) => Promise<TokenUsage>;

export function usageOf(plan: ReplyPlan, output: number): TokenUsage {
  const writes = plan.cacheWriteTokens + plan.cacheWriteLongTokens;
  return {
    input: plan.inputTokens,
    output,
    cachedInput: plan.cachedTokens,
    ...(writes > 0 ? { cacheWrite: plan.cacheWriteTokens, cacheWriteLong: plan.cacheWriteLongTokens } : {}),
  };
}

/** Writes the deltas; with an injected stream error, stops after `streamErrorAfter` of them. Returns how many went out. */
export async function writeDeltas(
  ctx: SimContext,
  out: StreamWriter,
  frames: readonly string[],
  errorFrame: (sent: number, error: Uint8Array) => string | Uint8Array = (_sent, error) => error,
): Promise<{ sent: number; failed: boolean }> {
  const { plan } = ctx;
  for (let i = 0; i < frames.length; i++) {
    if (plan.errorCode !== undefined && plan.streamErrorAfter === i) {
      await out.write(errorFrame(i, ctx.adapter.streamErrorEvent(plan.errorCode, 'simulated refusal mid-stream')));
      out.end();
      return { sent: i, failed: true };
    }
    await out.write(frames[i] ?? '');
  }
  return { sent: frames.length, failed: false };
}
