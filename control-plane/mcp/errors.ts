import { z } from 'zod';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { documentationUrl, type SvcError } from '../../core/errors/index.ts';

const JSONRPC_APPLICATION = -32000;

/**
 * A JSON-RPC error answer: the SDK sends a thrown error's `code`, `message` and `data` as they
 * are (its own McpError would prefix the message with its code).
 */
export class RpcError extends Error {
  readonly code: number;
  readonly data: Record<string, unknown>;

  constructor(code: number, message: string, data: Record<string, unknown>) {
    super(message);
    this.name = 'RpcError';
    this.code = code;
    this.data = data;
  }
}

/** The structured content of a tool result with `isError`: the SVC error of spec 7.1. */
export const ToolErrorSchema = z.object({
  error: z.object({
    code: z.string(),
    message: z.string(),
    details: z.record(z.string(), z.unknown()),
    retryable: z.boolean(),
    request_id: z.string(),
    documentation_url: z.string(),
  }),
});

/**
 * A failed tool call as MCP clients expect it (spec 7.4, ARCHITECTURE §7c): an application error
 * (not found, conflict, budget, policy, permission) is a tool result with `isError` and the SVC
 * code, which a model can read and act on; invalid params (-32602) and internal errors (-32603)
 * are JSON-RPC errors, as the catalogue maps each code.
 */
export function toolFailure(error: SvcError, requestId: string, documentationBase: string): CallToolResult {
  const details: Record<string, unknown> = { ...error.details };
  if (error.fieldViolations.length > 0) details.field_violations = error.fieldViolations;
  if (error.spec.jsonrpc !== JSONRPC_APPLICATION) {
    throw new RpcError(error.spec.jsonrpc, error.message, { code: error.code, request_id: requestId, ...details });
  }
  const structured: z.infer<typeof ToolErrorSchema> = {
    error: {
      code: error.code,
      message: error.message,
      details,
      retryable: error.spec.retryable,
      request_id: requestId,
      documentation_url: documentationUrl(documentationBase, error.code),
    },
  };
  return {
    isError: true,
    content: [{ type: 'text', text: `${error.code}: ${error.message}` }],
    structuredContent: structured,
  };
}
