import { SvcError } from '../../core/errors/index.ts';
import type { ProxiedRequest } from '../listener/index.ts';

export interface McpServer {
  name: string;
  url: URL;
}

export interface McpServers {
  readonly servers: readonly McpServer[];
  /** Reverse routes `/mcp/<name>` → server URL, for the listener. */
  readonly reverseRoutes: Record<string, string>;
  /** Hosts (`host` and `host:port`) whose traffic is MCP, for interception. */
  readonly hosts: ReadonlySet<string>;
  matches(req: ProxiedRequest): boolean;
}

/** Parses `name=url,name=url` (config key proxy_mcp_servers). */
export function parseMcpServers(value: string, key = 'proxy_mcp_servers'): McpServers {
  const servers: McpServer[] = [];
  for (const entry of value
    .split(',')
    .map((e) => e.trim())
    .filter((e) => e !== '')) {
    const at = entry.indexOf('=');
    const name = at > 0 ? entry.slice(0, at).trim() : '';
    const url = URL.parse(at > 0 ? entry.slice(at + 1).trim() : '');
    if (!/^[A-Za-z0-9._~-]+$/.test(name) || url === null || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
      const description = `entry "${entry}" must be name=http(s)://server`;
      throw new SvcError('SVC-SYS-9002', `invalid ${key}: ${description}`, { fields: key }, [
        { field: key, description },
      ]);
    }
    servers.push({ name, url });
  }
  const reverseRoutes = Object.fromEntries(servers.map((s) => [`/mcp/${s.name}`, s.url.origin]));
  const hosts = new Set(servers.flatMap((s) => [s.url.hostname.toLowerCase(), s.url.host.toLowerCase()]));
  const routes = new Set(servers.map((s) => `mcp/${s.name}`));
  return {
    servers,
    reverseRoutes,
    hosts,
    matches(req) {
      if (req.route !== undefined) return routes.has(req.route);
      return hosts.has(req.targetUrl.host.toLowerCase());
    },
  };
}
