import { createServer, connect, type Server, type Socket } from 'node:net';

/** A TCP relay between a process and a server, which a test can cut and restore (a network outage). */
export interface TcpRelay {
  readonly port: number;
  /** Drops every relayed connection and refuses new ones (nothing listens on the port). */
  cut(): Promise<void>;
  /** Listens again on the same port. */
  restore(): Promise<void>;
  close(): Promise<void>;
}

/** Relays 127.0.0.1:<a free port> to `target`; the port stays the same across cut and restore. */
export async function startTcpRelay(target: { host: string; port: number }): Promise<TcpRelay> {
  const sockets = new Set<Socket>();
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    // A reset on one side is the outage being simulated, not a failure of the test.
    socket.on('error', () => socket.destroy());
  };
  const serve = (): Server =>
    createServer((client) => {
      track(client);
      const upstream = connect(target.port, target.host);
      track(upstream);
      client.pipe(upstream);
      upstream.pipe(client);
      client.once('close', () => upstream.destroy());
      upstream.once('close', () => client.destroy());
    });
  const listen = (server: Server, port: number) =>
    new Promise<number>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        server.off('error', reject);
        const address = server.address();
        resolve(typeof address === 'object' && address !== null ? address.port : port);
      });
    });
  let server: Server | null = serve();
  const port = await listen(server, 0);
  const stop = async (): Promise<void> => {
    const closing = server;
    server = null;
    for (const socket of sockets) socket.destroy();
    if (closing !== null) await new Promise<void>((resolve) => closing.close(() => resolve()));
  };
  return {
    port,
    cut: stop,
    async restore() {
      if (server !== null) return;
      server = serve();
      await listen(server, port);
    },
    close: stop,
  };
}
