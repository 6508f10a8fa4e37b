/**
 * The floor any Node proxy pays: node:http in, undici out, the answer piped back, nothing else.
 * Run as a process of its own (`fork`) with the upstream's URL; it sends its port.
 */
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pipeline } from 'node:stream/promises';
import { Agent } from 'undici';

const upstream = process.argv[2] ?? 'http://127.0.0.1:1';
const agent = new Agent({ keepAliveTimeout: 60_000 });
const server = createServer((req, res) => {
  agent
    .request({ origin: upstream, path: req.url ?? '/', method: 'POST', headers: req.headers, body: req })
    .then(async (up) => {
      res.writeHead(up.statusCode, up.headers as Record<string, string>);
      await pipeline(up.body, res);
    })
    .catch(() => res.destroy());
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1');
await once(server, 'listening');
process.send?.({ port: (server.address() as AddressInfo).port });
