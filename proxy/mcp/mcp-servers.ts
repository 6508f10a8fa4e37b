import type { ProxiedRequest } from '../listener/index.ts';
import { parseNameUrlList, type NamedUrl } from '../upstream/index.ts';

export type McpServer = NamedUrl;

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
  const servers: McpServer[] = parseNameUrlList(value, key, { label: 'name', pattern: /^[A-Za-z0-9._~-]+$/ });
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
