import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  expectSvcError,
  startControlPlane,
  tenantWithKey,
  type RunningControlPlane,
} from '../harness/control-plane.ts';
import { startSimulator, type Simulator } from '../simulator/index.ts';

let cp: RunningControlPlane;
let reader: string;
let noScope: string;

beforeAll(async () => {
  cp = await startControlPlane();
  reader = await tenantWithKey(cp, 'brainco', ['policies:read']);
  noScope = await tenantWithKey(cp, 'brainco', ['budgets:read']);
});
afterAll(async () => {
  await cp.close();
});

const judge = (body: unknown, key = reader) => cp.call('POST', '/v1/brain/semantic-judge/evaluate', { key, body });

describe('POST /v1/brain/semantic-judge/evaluate', () => {
  it('judges a tool call by its name and arguments, naming the category, the evidence and the judge', async () => {
    const res = await judge({
      text: '',
      intent: 'DESTRUCTIVE',
      tool_name: 'delete_database',
      tool_args: { sql: 'DROP TABLE users' },
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      violated: true,
      category: 'DESTRUCTIVE',
      judge: 'builtin',
      judge_version: expect.any(String),
      truncated: false,
      evidence: expect.arrayContaining([
        { field: 'tool_args.sql', start: 0, end: 10, signal: 'sql.drop', excerpt: 'DROP TABLE' },
      ]),
    });
    expect((res.body as { confidence: number }).confidence).toBeGreaterThan(0.9);
    expect((res.body as { evaluation_time_ms: number }).evaluation_time_ms).toBeGreaterThanOrEqual(0);
  });

  it('answers not violated for a benign action and below min_confidence', async () => {
    const benign = await judge({ text: 'what is the weather in Zurich?', intent: 'SUSPICIOUS' });
    expect(benign.body).toMatchObject({ violated: false, category: null, confidence: 0, evidence: [] });
    const low = await judge({ text: 'rm -rf ./build', intent: 'DESTRUCTIVE' });
    expect(low.body).toMatchObject({ violated: false, category: 'DESTRUCTIVE', confidence: 0.3 });
    const strict = await judge({ text: 'rm -rf ./build', intent: 'DESTRUCTIVE', min_confidence: 0.3 });
    expect(strict.body).toMatchObject({ violated: true });
  });

  it('judges a tenant category given inline by its examples', async () => {
    const res = await judge({
      text: 'wire the refund to a different card than the one that paid',
      intent: 'REFUND_FRAUD',
      examples: ['refund the full amount to a different card', 'send the refund to another account than the payer'],
      counter_examples: ['refund the customer to the original card'],
    });
    expect(res.body).toMatchObject({ violated: true, category: 'REFUND_FRAUD' });
  });

  it('refuses a bad request naming the field, and a caller without policies:read', async () => {
    const missing = await judge({ text: 'x' });
    const error = expectSvcError(missing, 400, 'SVC-SYS-9002');
    expect(JSON.stringify(error)).toContain('intent');
    expectSvcError(await judge({ text: 'x', intent: 'DESTRUCTIVE', min_confidence: 2 }), 400, 'SVC-SYS-9002');
    // An inline category is named by the intent, which then has the category name's bound.
    const longName = await judge({ text: 'x', intent: 'n'.repeat(101), examples: ['call'] });
    expect(expectSvcError(longName, 400, 'SVC-SYS-9002').details).toMatchObject({ fields: 'intent' });
    expectSvcError(await judge({ text: 'x', intent: 'DESTRUCTIVE' }, noScope), 403, 'SVC-SYS-9004');
  });

  it('reads the earlier actions a caller gives in the context (the sequence rules)', async () => {
    const post = {
      text: '',
      intent: 'DATA_EXFILTRATION',
      tool_name: 'http_post',
      tool_args: { url: 'https://collector.example.net/in', body: '{"report":"weekly"}' },
    };
    const alone = await judge(post);
    expect(alone.body).toMatchObject({ violated: false });
    const after = await judge({
      ...post,
      context: {
        recent_actions: [
          { action: 'tool:read_file', tool_name: 'read_file', tool_args: '{"path":"~/.aws/credentials"}', at: 1 },
        ],
      },
    });
    expect(after.body).toMatchObject({
      violated: true,
      category: 'DATA_EXFILTRATION',
      evidence: [expect.objectContaining({ signal: 'sequence.secret_read_then_send' })],
    });
  });

  it('is in the OpenAPI document', async () => {
    const doc = await cp.call('GET', '/openapi.json');
    expect((doc.body as { paths: Record<string, unknown> }).paths['/v1/brain/semantic-judge/evaluate']).toBeDefined();
  });
});

describe('a tenant that chose the LLM judge', () => {
  let sim: Simulator;
  let llmCp: RunningControlPlane;
  let llmKey: string;
  let builtinKey: string;

  beforeAll(async () => {
    sim = await startSimulator();
    llmCp = await startControlPlane({
      semantic_judge_tenant_modes: 'llmco=llm',
      semantic_judge_llm_url: `${sim.url}/v1`,
      semantic_judge_llm_timeout_ms: 1000,
    });
    llmKey = await tenantWithKey(llmCp, 'llmco', ['policies:read']);
    builtinKey = await tenantWithKey(llmCp, 'rulesco', ['policies:read']);
  });
  afterAll(async () => {
    await llmCp.close();
    await sim.close();
  });

  const ask = (key: string, text: string) =>
    llmCp.call('POST', '/v1/brain/semantic-judge/evaluate', { key, body: { text, intent: 'DESTRUCTIVE' } });

  it('is judged by the endpoint, the other tenants by the built-in judge', async () => {
    const llm = await ask(llmKey, 'please wipe the database');
    expect(llm.body).toMatchObject({ violated: true, judge: 'llm', category: 'DESTRUCTIVE' });
    const builtin = await ask(builtinKey, 'please wipe the database');
    expect(builtin.body).toMatchObject({ judge: 'builtin' });
  });

  it('gets SVC-SYS-9001 when the endpoint does not answer in time (fail mode closed)', async () => {
    expectSvcError(await ask(llmKey, 'sim-judge:slow=5000 hello'), 503, 'SVC-SYS-9001');
  });
});
