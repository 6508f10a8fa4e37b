import { APIError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../harness/eventually.ts';
import { startProxyRig, type ProxyRig } from './harness.ts';
import { openAiClient } from './sdk-options.ts';

/** What held calls may keep at once: room for one of the large requests below, not two. */
const HELD_MAX_BYTES = 300 * 1024;
const LARGE = 'x'.repeat(200 * 1024);

let rig: ProxyRig;

beforeAll(async () => {
  rig = await startProxyRig({
    proxy_body_limit_bytes: 256 * 1024,
    proxy_held_max_bytes: HELD_MAX_BYTES,
    proxy_approval_timeout_seconds: 60,
  });
  await rig.addPolicy({
    name: 'big-model-needs-a-human',
    rules: [{ action: 'llm:gpt-4o', effect: 'require_approval', message: 'gpt-4o needs a human' }],
    priority: 600,
  });
});
afterAll(async () => {
  await rig.close();
});

async function pending(): Promise<{ approval_id: string }[]> {
  return (await rig.admin('GET', '/v1/approvals?status=PENDING')).body as unknown as { approval_id: string }[];
}

async function refusal(call: Promise<unknown>): Promise<APIError> {
  const error = await call.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(APIError);
  return error as APIError;
}

function held(content: string) {
  return openAiClient(rig.agent).chat.completions.create(
    { model: 'gpt-4o', max_tokens: 5, messages: [{ role: 'user', content }] },
    { maxRetries: 0 },
  );
}

describe('the bytes of held calls', () => {
  it('refuses a large call at once with SVC-SYS-9005 when held requests would pass proxy_held_max_bytes', async () => {
    const upstreamBefore = rig.sim.requests.length;
    const first = refusal(held(LARGE));
    const [approval] = await eventually(pending, (list) => list.length === 1, 10_000, 50);

    const started = Date.now();
    const error = await refusal(held(LARGE));
    // Not held: the hold would last the approval timeout (60 s).
    expect(Date.now() - started).toBeLessThan(5000);
    expect(error.status).toBe(429);
    expect(error.code).toBe('SVC-SYS-9005');
    expect(error.message).toContain(`of ${HELD_MAX_BYTES} bytes (proxy_held_max_bytes)`);
    expect(await pending()).toHaveLength(1);

    // A small call still fits beside the large one.
    const small = refusal(held('small'));
    await eventually(pending, (list) => list.length === 2, 10_000, 50);
    for (const { approval_id } of await pending())
      await rig.admin('PATCH', `/v1/approvals/${approval_id}`, { status: 'REJECTED', reviewer_id: 'bob' });
    expect((await first).message).toContain(`approval ${approval!.approval_id} was rejected`);
    expect((await small).code).toBe('SVC-POL-2004');
    expect(rig.sim.requests.length).toBe(upstreamBefore);

    // The bytes of the holds that ended are free again.
    const again = refusal(held(LARGE));
    const [next] = await eventually(pending, (list) => list.length === 1, 10_000, 50);
    await rig.admin('PATCH', `/v1/approvals/${next!.approval_id}`, { status: 'REJECTED', reviewer_id: 'bob' });
    expect((await again).code).toBe('SVC-POL-2004');
  });
});

describe('an approval whose held call ended undecided', () => {
  it("is rejected in the proxy's name when its client leaves, so that none is left pending", async () => {
    expect(await pending()).toEqual([]);
    const calls = 3;
    const opened: string[] = [];
    for (let i = 0; i < calls; i++) {
      const client = new AbortController();
      const call = openAiClient(rig.agent)
        .chat.completions.create(
          { model: 'gpt-4o', max_tokens: 5, messages: [{ role: 'user', content: `left ${i}` }] },
          { maxRetries: 0, signal: client.signal },
        )
        .catch(() => undefined);
      const [approval] = await eventually(pending, (list) => list.length === 1, 10_000, 50);
      opened.push(approval!.approval_id);
      // The agent gives up while its approval is pending.
      client.abort();
      await call;
      await eventually(pending, (list) => list.length === 0, 10_000, 50);
    }
    for (const id of opened) {
      const approval = (await rig.admin('GET', `/v1/approvals/${id}`)).body;
      expect(approval).toMatchObject({
        status: 'REJECTED',
        reviewer_id: expect.stringMatching(/^proxy:/),
        review_note: expect.stringMatching(/^withdrawn: the held call was cancelled/),
      });
    }
  });
});
