import { createDocument, type ZodOpenApiPathsObject } from 'zod-openapi';
import type { RouteTable } from './route.ts';

/** OpenAPI 3.1 made from the routes' own zod schemas: the contract cannot drift from the code. */
export function openApiDocument(routes: RouteTable, version: string): ReturnType<typeof createDocument> {
  const paths: ZodOpenApiPathsObject = {};
  for (const { path, method, operation } of routes.operations()) {
    paths[path] = { ...paths[path], [method]: operation };
  }
  return createDocument({
    openapi: '3.1.0',
    info: {
      title: 'Agent governance control plane',
      version,
      description: 'Execution envelopes, budgets, policies, tenancy and audit. Errors follow SVC-{DOMAIN}-{CODE}.',
    },
    servers: [{ url: '/' }],
    components: {
      securitySchemes: {
        apiKey: { type: 'apiKey', in: 'header', name: 'X-Api-Key' },
        bearer: { type: 'http', scheme: 'bearer', description: 'an API key or a JWT from the identity provider' },
      },
    },
    security: [{ apiKey: [] }, { bearer: [] }],
    paths,
  });
}
