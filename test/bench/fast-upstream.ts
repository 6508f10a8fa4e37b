/**
 * A fast OpenAI-style upstream for the benchmarks and the memory test: chat completions answered
 * at once, whole (with usage) or as a stream of `chunks` SSE events (`x-bench-chunks`, default 20)
 * ending with a usage chunk and `[DONE]`. Run as a process of its own (`fork`), it sends its port.
 */
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

const WHOLE = JSON.stringify({
  id: 'chatcmpl-bench',
  object: 'chat.completion',
  model: 'gpt-4o-mini',
  choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 12, completion_tokens: 1, total_tokens: 13 },
});
/** One streamed event carrying `content`, as the upstream writes it. */
export const streamChunk = (content: string): string =>
  `data: ${JSON.stringify({ id: 'chatcmpl-bench', object: 'chat.completion.chunk', model: 'gpt-4o-mini', choices: [{ index: 0, delta: { content } }] })}\n\n`;
/** The usage chunk and `[DONE]` that end every stream. */
export const STREAM_END = `data: ${JSON.stringify({ id: 'chatcmpl-bench', object: 'chat.completion.chunk', model: 'gpt-4o-mini', choices: [], usage: { prompt_tokens: 12, completion_tokens: 20, total_tokens: 32 } })}\n\ndata: [DONE]\n\n`;

export async function startFastUpstream(port = 0): Promise<Server> {
  const server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      const stream = Buffer.concat(parts).includes('"stream":true');
      if (!stream) {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(WHOLE) });
        res.end(WHOLE);
        return;
      }
      const chunks = Number(req.headers['x-bench-chunks'] ?? 20);
      const delayMs = Number(req.headers['x-bench-delay-ms'] ?? 0);
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      let sent = 0;
      const next = () => {
        if (res.destroyed) return;
        if (sent === chunks) {
          res.end(STREAM_END);
          return;
        }
        res.write(streamChunk(`w${sent++} `));
        if (delayMs > 0) setTimeout(next, delayMs);
        else next();
      };
      next();
    });
  });
  server.keepAliveTimeout = 60_000;
  server.listen(port, '127.0.0.1');
  await once(server, 'listening');
  return server;
}

if (process.argv[1] === import.meta.filename) {
  const server = await startFastUpstream();
  process.send?.({ port: (server.address() as AddressInfo).port });
}
