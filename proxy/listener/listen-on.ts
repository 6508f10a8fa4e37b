import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** Listens and resolves with the bound address, or rejects with the listen error (port in use). */
export async function listenOn(server: Server, port: number, host: string): Promise<AddressInfo> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return server.address() as AddressInfo;
}
