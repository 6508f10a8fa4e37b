import type { Socket } from 'node:net';

/**
 * Closes `socket` once no byte has crossed it, either way, for `idleMs` (at most half as long
 * again). Read from the socket's own counters, which count every byte on the wire whichever layer
 * consumes it (a pipe, a TLS session, the HTTP parser), so blind and intercepted tunnels are
 * watched alike without a listener on the stream. A reader that stops reading leaves its bytes
 * queued, not counted, and is idle too.
 */
export function closeWhenIdle(socket: Socket, idleMs: number, onIdle: () => void): void {
  let moved = socket.bytesRead + socket.bytesWritten;
  let quietSince = performance.now();
  const timer = setInterval(
    () => {
      const now = performance.now();
      const total = socket.bytesRead + socket.bytesWritten;
      if (total !== moved) {
        moved = total;
        quietSince = now;
      } else if (now - quietSince >= idleMs) {
        clearInterval(timer);
        onIdle();
      }
    },
    Math.max(1, Math.floor(idleMs / 4)),
  );
  timer.unref();
  socket.once('close', () => clearInterval(timer));
}
