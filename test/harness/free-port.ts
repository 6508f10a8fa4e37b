import { createServer } from 'node:net';

/**
 * Ports for servers that tests start as separate processes. They come from below Linux's
 * ephemeral range (32768–60999): a port taken from that range and released again can be grabbed
 * by any outgoing connection before the process binds it, which made starts fail with EADDRINUSE.
 * A port is checked by binding it, and never handed out twice by one test process.
 */
const LOW = 20_000;
const HIGH = 32_700;
const given = new Set<number>();

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = LOW + Math.floor(Math.random() * (HIGH - LOW));
    if (given.has(port)) continue;
    given.add(port);
    if (await bindable(port)) return port;
  }
  throw new Error(`no free port between ${LOW} and ${HIGH}`);
}
