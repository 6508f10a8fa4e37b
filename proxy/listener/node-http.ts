import { createRequire } from 'node:module';
import type * as Http from 'node:http';

/**
 * node:http, loaded with `require`. An ESM import of a built-in module reads every one of its
 * exports, and node:http's lazy `WebSocket`, `CloseEvent` and `MessageEvent` getters then load
 * Node's bundled fetch stack: about 3 MB resident and 0.1 s of CPU at start for code the proxy never
 * runs. Types still come from `import type`.
 */
const http = createRequire(import.meta.url)('node:http') as typeof Http;

export const { createServer, STATUS_CODES } = http;
