import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { ERROR_CATALOGUE, GRPC, isSvcCode, type SvcCode } from './catalogue.ts';

/** Where a process serves the page of a code: `<base>/docs/errors/<code>`. */
export const ERROR_DOCS_PREFIX = '/docs/errors/';

/** The base URL error bodies link to; a function, since the listening port is known only once bound. */
export type DocumentationBase = () => string;

export function documentationUrl(baseUrl: string, code: SvcCode): string {
  return `${baseUrl.replace(/\/+$/, '')}${ERROR_DOCS_PREFIX}${code}`;
}

/**
 * The URL a process is reached by when nothing is configured: its own listening address, with a
 * wildcard address replaced by loopback (right for a sidecar, whose agent shares the pod; a
 * control plane behind a load balancer sets `public_base_url`).
 */
export function listeningBaseUrl(address: AddressInfo | string | null): string {
  if (address === null || typeof address === 'string') throw new Error('not listening on a TCP port');
  const host =
    address.address === '0.0.0.0' || address.address === ''
      ? '127.0.0.1'
      : address.address === '::'
        ? '[::1]'
        : address.family === 'IPv6'
          ? `[${address.address}]`
          : address.address;
  return `http://${host}:${address.port}`;
}

const ERRORS_DOC = new URL('../../docs/errors.md', import.meta.url);
const GRPC_NAMES = new Map<number, string>(Object.entries(GRPC).map(([name, code]) => [code, name]));

/** The `### <code>` sections of docs/errors.md, up to the next heading. */
function sections(markdown: string): Map<string, string> {
  const found = new Map<string, string>();
  const parts = markdown.split(/^(#{1,3} .*)$/m);
  for (let i = 1; i < parts.length; i += 2) {
    const code = /^### (SVC-[A-Z]+-\d+)\s*$/.exec(parts[i] ?? '')?.[1];
    if (code !== undefined) found.set(code, (parts[i + 1] ?? '').trim());
  }
  return found;
}

/**
 * The page of every SVC code, generated once from docs/errors.md: the code's title and statuses
 * from the catalogue, then its section of the document, as plain text. Both processes serve the
 * same pages at `/docs/errors/{code}`.
 */
export class ErrorPages {
  readonly #pages: ReadonlyMap<SvcCode, string>;

  private constructor(pages: ReadonlyMap<SvcCode, string>) {
    this.#pages = pages;
  }

  /** Fails when a code of the catalogue has no section: a link in an error body must never dangle. */
  static fromMarkdown(markdown: string): ErrorPages {
    const found = sections(markdown);
    const pages = new Map<SvcCode, string>();
    for (const [code, spec] of Object.entries(ERROR_CATALOGUE) as Array<[SvcCode, (typeof ERROR_CATALOGUE)[SvcCode]]>) {
      const text = found.get(code);
      if (text === undefined || text === '') throw new Error(`docs/errors.md has no section for ${code}`);
      const retry = spec.retryable ? 'recoverable: retry with backoff' : 'terminal: do not retry';
      const statuses = `HTTP ${spec.http} · gRPC ${spec.grpc} ${GRPC_NAMES.get(spec.grpc) ?? ''} · JSON-RPC ${spec.jsonrpc} · ${retry}`;
      pages.set(code, `${code}: ${spec.title}\n\n${statuses}\n\n${text}\n`);
    }
    return new ErrorPages(pages);
  }

  /** The pages of the docs/errors.md that ships beside the code. */
  static load(): ErrorPages {
    return ErrorPages.fromMarkdown(readFileSync(ERRORS_DOC, 'utf8'));
  }

  page(code: string): string | undefined {
    return isSvcCode(code) ? this.#pages.get(code) : undefined;
  }

  codes(): SvcCode[] {
    return [...this.#pages.keys()];
  }
}
