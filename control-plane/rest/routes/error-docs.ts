import { z } from 'zod';
import { ErrorBodySchema, SvcError, type ErrorPages } from '../../../core/errors/index.ts';
import type { RouteTable } from '../route.ts';

const ParamsSchema = z.object({ code: z.string() });

/** `GET /docs/errors/{code}`: the page every `documentation_url` points at; public. */
export function errorDocsRoutes(routes: RouteTable, pages: ErrorPages): void {
  routes.add({
    method: 'GET',
    path: '/docs/errors/{code}',
    operationId: 'errorDocumentation',
    tag: 'operations',
    access: 'public',
    summary: 'What an SVC error code means and what to do about it (plain text)',
    params: ParamsSchema,
    responses: {
      200: { description: 'the page of the code', schema: z.string(), contentType: 'text/plain' },
      404: { description: 'no such code (SVC-SYS-9006)', schema: ErrorBodySchema },
    },
    handler: ({ params }) => {
      const page = pages.page(params.code);
      if (page === undefined) throw new SvcError('SVC-SYS-9006', `no error code ${params.code}`, { code: params.code });
      return { status: 200, body: page, contentType: 'text/plain; charset=utf-8' };
    },
  });
}
