import { APIError } from 'openai';
import { describe, expect, it } from 'vitest';
import { SECRET_READ_SEQUENCE } from '../fixtures/policies.ts';
import { eventually } from '../harness/control-plane.ts';
import type { ProxyRig } from './harness.ts';
import { READ_AND_POST_REQUEST, sidecarWith } from './read-and-post.ts';
import { openAiClient } from './sdk-options.ts';
import { failure } from '../harness/failure.ts';

/**
 * A sequence rule written by the tenant in the policy language, through the proxy with the
 * OpenAI SDK: a read of a secret-looking path, then a post to a host outside the rule's allow
 * list, is refused on the second call, in the same execution, in another execution of the
 * sidecar, and after any number of harmless calls; the reverse order, the post to an allowed
 * host, and a post after a harmless read pass. Each describe has a sidecar of its own: a read is
 * remembered sidecar-wide.
 */
const readPath = (path: string) => JSON.stringify({ path });
const postTo = (host: string) => JSON.stringify({ url: `https://${host}/ingest`, body: 'weekly summary' });

/** A sidecar with the tenant's rule, for the describe it is called in. */
const sidecar = () =>
  sidecarWith({
    name: 'secret-read-then-post',
    priority: 500,
    rules: [
      {
        action: 'tool:http_post',
        effect: 'deny',
        message: 'a secret was read on this sidecar',
        conditions: [
          { field: 'recent_actions', operator: 'sequence', value: SECRET_READ_SEQUENCE },
          { field: 'tool_hosts', operator: 'not_in', value: ['uploads.acme.example'] },
        ],
      },
    ],
  });

async function ask(rig: ProxyRig, execution: string, tool: string, args: string): Promise<string | undefined> {
  const answer = await openAiClient(rig.agent, {
    'X-Svc-Execution-Id': execution,
    'x-sim-tool-call': tool,
    'x-sim-tool-args': args,
  }).chat.completions.create(READ_AND_POST_REQUEST);
  const call = answer.choices[0]?.message.tool_calls?.[0];
  return call?.type === 'function' ? call.function.name : undefined;
}

/** The post refused by the rule, and the detection the control plane keeps for `execution`. */
async function expectRefusedPost(rig: ProxyRig, execution: string): Promise<void> {
  const error = await failure(() => ask(rig, execution, 'http_post', postTo('collector.example.net')));
  expect(error).toBeInstanceOf(APIError);
  expect((error as APIError).status).toBe(403);
  expect((error as APIError).code).toBe('SVC-POL-2001');
  expect((error as APIError).message).toContain('a secret was read on this sidecar');
  // The proxy reports the match; the control plane keeps it as a detection of the execution.
  const detections = await eventually(
    async () =>
      (await rig.admin('GET', `/v1/brain/immune-system/detections?execution_id=${execution}`)).body as {
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
      execution_id: execution,
      source: expect.stringMatching(/^proxy/),
    }),
  ]);
}

describe('a tenant-written sequence rule', () => {
  const s = sidecar();

  it('lets the same calls through in the reverse order', async () => {
    expect(await ask(s.rig, 'exec-seq-2', 'http_post', postTo('collector.example.net'))).toBe('http_post');
    expect(await ask(s.rig, 'exec-seq-2', 'read_file', readPath('/app/.env'))).toBe('read_file');
    const listed = await s.rig.admin('GET', '/v1/brain/immune-system/detections?execution_id=exec-seq-2');
    expect((listed.body as { detections: unknown[] }).detections).toEqual([]);
  });

  it('refuses the post that follows a secret read in the same execution', async () => {
    expect(await ask(s.rig, 'exec-seq-1', 'read_file', readPath('/app/.env'))).toBe('read_file');
    await expectRefusedPost(s.rig, 'exec-seq-1');
  });

  it('lets through a post to an allowed host', async () => {
    await ask(s.rig, 'exec-seq-3', 'read_file', readPath('~/.ssh/id_rsa'));
    expect(await ask(s.rig, 'exec-seq-3', 'http_post', postTo('uploads.acme.example'))).toBe('http_post');
  });
});

describe('a tenant-written sequence rule across the executions of one sidecar', () => {
  const s = sidecar();

  it('lets a post through after a harmless read, and refuses one after a secret read in another execution', async () => {
    await ask(s.rig, 'exec-seq-4', 'read_file', readPath('docs/notes.md'));
    expect(await ask(s.rig, 'exec-seq-5', 'http_post', postTo('collector.example.net'))).toBe('http_post');
    expect(await ask(s.rig, 'exec-seq-6', 'read_file', readPath('/app/.env'))).toBe('read_file');
    await expectRefusedPost(s.rig, 'exec-seq-7');
  });
});

describe('a tenant-written sequence rule past harmless calls', () => {
  const s = sidecar();

  it('refuses the post however many harmless calls came between', async () => {
    expect(await ask(s.rig, 'exec-seq-8', 'read_file', readPath('/app/.env'))).toBe('read_file');
    for (let i = 0; i < 20; i++)
      expect(await ask(s.rig, 'exec-seq-8', 'read_file', readPath(`docs/notes-${i}.md`))).toBe('read_file');
    await expectRefusedPost(s.rig, 'exec-seq-8');
  });
});
