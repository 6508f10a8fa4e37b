export { governMcp } from './mcp-handler.ts';
export { parseMcpServers, type McpServer, type McpServers } from './mcp-servers.ts';
