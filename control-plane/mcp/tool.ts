import { z } from 'zod';
import type { Scope } from '../../core/domain/index.ts';
import { fieldViolations } from '../../core/errors/index.ts';
import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import { requireScope } from '../auth/scopes.ts';
import type { Caller } from '../caller.ts';
import { RpcError, ToolErrorSchema } from './errors.ts';

/** What a tool's hints tell a client: set from what the tool does, never optimistically. */
export interface ToolHints {
  readOnlyHint: boolean;
  destructiveHint: boolean;
  idempotentHint: boolean;
}

export interface ToolSpec<I extends z.ZodObject, O extends z.ZodObject> {
  name: string;
  title: string;
  description: string;
  /** The scope REST asks for the same operation. */
  scope: Scope;
  input: I;
  output: O;
  hints: ToolHints;
  /** The domain call: a short text for people and the structured answer. */
  run(caller: Caller, input: z.output<I>): Promise<{ text: string; data: z.input<O> }>;
}

/** A tool as the server serves it, its types erased. */
export interface McpTool {
  name: string;
  scope: Scope;
  definition: Tool;
  /** Checks scope and arguments, then runs. Invalid arguments throw -32602 naming the fields. */
  call(caller: Caller, args: unknown): Promise<CallToolResult>;
}

export const hints = {
  read: { readOnlyHint: true, destructiveHint: false, idempotentHint: true },
  /** Adds records (and audit records) each time it is called. */
  create: { readOnlyHint: false, destructiveHint: false, idempotentHint: false },
  /** Replaces or removes what is there; a repeat writes another revision or is refused. */
  change: { readOnlyHint: false, destructiveHint: true, idempotentHint: false },
  /** Ends something for good; a repeat leaves it as the first call did. */
  revoke: { readOnlyHint: false, destructiveHint: true, idempotentHint: true },
} as const satisfies Record<string, ToolHints>;

function jsonSchemaOf(schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { io }) as Record<string, unknown>;
  return rest;
}

/**
 * An MCP `outputSchema` must be an object schema; a tool answers either its result or, with
 * `isError`, the SVC error, and clients check `structuredContent` against the schema either way.
 */
function outputSchemaOf(output: z.ZodObject): Tool['outputSchema'] {
  return { type: 'object', ...jsonSchemaOf(z.union([output, ToolErrorSchema]), 'output') };
}

export function defineTool<I extends z.ZodObject, O extends z.ZodObject>(spec: ToolSpec<I, O>): McpTool {
  return {
    name: spec.name,
    scope: spec.scope,
    definition: {
      name: spec.name,
      title: spec.title,
      description: spec.description,
      inputSchema: { ...jsonSchemaOf(spec.input, 'input'), type: 'object' },
      outputSchema: outputSchemaOf(spec.output),
      annotations: { title: spec.title, ...spec.hints, openWorldHint: false },
    },
    async call(caller, args) {
      // Permission first, as on REST: a caller that may not use the tool learns nothing of its inputs.
      requireScope(caller.principal, spec.scope);
      const parsed = spec.input.safeParse(args ?? {});
      if (!parsed.success) {
        const violations = fieldViolations(parsed.error).map((v) => ({
          field: v.field === '(body)' ? '(arguments)' : v.field,
          description: v.description,
        }));
        throw new RpcError(
          -32602,
          `invalid params: ${violations.map((v) => `${v.field}: ${v.description}`).join('; ')}`,
          { code: 'SVC-SYS-9002', field_violations: violations },
        );
      }
      const { text, data } = await spec.run(caller, parsed.data);
      return { content: [{ type: 'text', text }], structuredContent: spec.output.parse(data) };
    },
  };
}
