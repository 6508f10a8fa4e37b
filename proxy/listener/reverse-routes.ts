import { z } from 'zod';
import { parseOrThrow } from '../../core/errors/index.ts';

/** Path prefix → upstream origin, e.g. `/openai` → `https://api.openai.com`. */
export const ReverseRoutesSchema = z.record(
  z.string().regex(/^\/[A-Za-z0-9._~-]+(\/[A-Za-z0-9._~-]+)*$/, 'must be a path prefix such as /openai'),
  z.url({ protocol: /^https?$/ }),
);
export type ReverseRoutes = z.infer<typeof ReverseRoutesSchema>;

export const DEFAULT_REVERSE_ROUTES: ReverseRoutes = {
  '/openai': 'https://api.openai.com',
  '/anthropic': 'https://api.anthropic.com',
  '/gemini': 'https://generativelanguage.googleapis.com',
};

export interface ReverseTarget {
  route: string;
  url: URL;
}

/** Matches request paths against the routes, longest prefix first. */
export type ReverseRouter = (pathAndQuery: string) => ReverseTarget | undefined;

export function compileReverseRoutes(routes: ReverseRoutes): ReverseRouter {
  const table = Object.entries(parseOrThrow(ReverseRoutesSchema, routes, 'reverse routes'))
    .map(([prefix, origin]) => ({ prefix, route: prefix.slice(1), base: new URL(origin) }))
    .sort((a, b) => b.prefix.length - a.prefix.length);
  return (pathAndQuery) => {
    for (const { prefix, route, base } of table) {
      if (!pathAndQuery.startsWith(prefix)) continue;
      const rest = pathAndQuery.slice(prefix.length);
      if (rest !== '' && rest[0] !== '/' && rest[0] !== '?') continue;
      const basePath = base.pathname === '/' ? '' : base.pathname.replace(/\/$/, '');
      const suffix = rest === '' || rest[0] === '?' ? `/${rest}` : rest;
      // Concatenated, not resolved: `/openai//elsewhere.test/x` must stay on the route's host.
      return { route, url: new URL(`${base.origin}${basePath}${suffix}`) };
    }
    return undefined;
  };
}
