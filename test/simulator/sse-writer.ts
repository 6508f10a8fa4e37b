import type { ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ReplyPlan } from './plan.ts';

/** Writes a stream event by event, pausing between events so tests can observe them arrive one by one. */
export interface StreamWriter {
  write(bytes: string | Uint8Array): Promise<void>;
  end(): void;
}

export function startStream(
  res: ServerResponse,
  contentType: string,
  { delayMs, firstEventDelayMs, endDelayMs }: Pick<ReplyPlan, 'delayMs' | 'firstEventDelayMs' | 'endDelayMs'>,
): StreamWriter {
  res.writeHead(200, { 'content-type': contentType, 'cache-control': 'no-cache', connection: 'keep-alive' });
  res.flushHeaders();
  let first = true;
  return {
    async write(bytes) {
      const pause = first ? firstEventDelayMs : delayMs;
      if (pause > 0) await sleep(pause);
      first = false;
      if (!res.destroyed) res.write(bytes);
    },
    end() {
      const end = () => {
        if (!res.destroyed) res.end();
      };
      if (endDelayMs > 0) setTimeout(end, endDelayMs).unref();
      else end();
    },
  };
}

export function sse(data: unknown, event?: string): string {
  return `${event === undefined ? '' : `event: ${event}\n`}data: ${JSON.stringify(data)}\n\n`;
}

export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}
