import type { Duplex } from 'node:stream';

/**
 * The first chunk the client sends (one socket read, so bounded by the stream's buffer), or
 * undefined when it closes or stays silent for `timeoutMs`. The caller unshifts the chunk back.
 */
export function readFirstBytes(socket: Duplex, timeoutMs: number): Promise<Buffer | undefined> {
  return new Promise((resolve) => {
    const done = (chunk: Buffer | undefined) => {
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('close', onClose);
      socket.off('end', onClose);
      socket.pause();
      resolve(chunk);
    };
    const onData = (chunk: Buffer) => done(chunk);
    const onClose = () => done(undefined);
    const timer = setTimeout(onClose, timeoutMs);
    socket.on('data', onData);
    socket.once('close', onClose);
    socket.once('end', onClose);
    socket.resume();
  });
}
