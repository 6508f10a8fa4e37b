import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cost, loadPriceTable } from '../../core/metering/prices.ts';
import { eventually } from '../harness/control-plane.ts';
import { freePort } from '../harness/free-port.ts';
import { controlPlaneDatabase, type ControlPlaneDatabase } from '../harness/postgres.ts';
import { startSimulator, type Simulator } from '../simulator/server.ts';
import { SIDECAR_NODE_FLAGS } from '../../proxy/node-flags.ts';

const ROOT = 'standalone-root-administrator-key-0001';
const ROOT_DIR = new URL('../..', import.meta.url).pathname;

interface Running {
  child: ChildProcess;
  printed: Record<string, string>;
}

/** Runs `node <flags> standalone/main.ts` as `npm start` does, and reads what it prints. */
async function startStandalone(env: Record<string, string>): Promise<Running> {
  const child = spawn(process.execPath, [...SIDECAR_NODE_FLAGS, 'standalone/main.ts'], {
    cwd: ROOT_DIR,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()));
  await eventually(
    () => out,
    (text) => text.includes('sidecar API key') || child.exitCode !== null,
    30_000,
  );
  if (child.exitCode !== null) throw new Error(`standalone exited: ${out}`);
  const printed: Record<string, string> = {};
  for (const line of out.split('\n')) {
    const match = /^(control plane|proxy CA|trust bundle|tenant|default budget|sidecar API key|proxy)\s+(\S+)/.exec(
      line,
    );
    if (match) printed[match[1]!] = match[2]!;
  }
  return { child, printed };
}

async function stop(running: Running): Promise<void> {
  if (running.child.exitCode !== null) return;
  const exited = new Promise((resolve) => running.child.once('exit', resolve));
  running.child.kill('SIGTERM');
  await exited;
}

/** The official OpenAI SDK in its own process, reaching api.openai.com through HTTPS_PROXY. */
async function agentCall(
  proxyUrl: string,
  caFile: string,
): Promise<{ envelopeId: string; usage: { prompt_tokens: number; completion_tokens: number }; content: string }> {
  const script = `
    import OpenAI from 'openai';
    const client = new OpenAI({ apiKey: 'sk-test', maxRetries: 0 });
    const { data, response } = await client.chat.completions
      .create({ model: 'gpt-4o-mini', max_tokens: 20, messages: [{ role: 'user', content: 'Say hello' }] })
      .withResponse();
    console.log(JSON.stringify({ envelopeId: response.headers.get('x-svc-envelope-id'), usage: data.usage, content: data.choices[0].message.content }));
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
    cwd: ROOT_DIR,
    env: { ...process.env, HTTPS_PROXY: proxyUrl, NODE_USE_ENV_PROXY: '1', NODE_EXTRA_CA_CERTS: caFile, NO_PROXY: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (err += c.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  if (code !== 0) throw new Error(`agent failed (${code}): ${err}`);
  return JSON.parse(out.trim().split('\n').at(-1)!) as {
    envelopeId: string;
    usage: { prompt_tokens: number; completion_tokens: number };
    content: string;
  };
}

describe('standalone mode (npm start)', () => {
  let sim: Simulator;
  let dataDir: string;
  let env: Record<string, string>;
  let running: Running;
  let database: ControlPlaneDatabase | null;

  beforeAll(async () => {
    sim = await startSimulator();
    dataDir = mkdtempSync(join(tmpdir(), 'standalone-'));
    database = await controlPlaneDatabase();
    env = {
      ...database?.env,
      SVC_DATA_DIR: dataDir,
      SVC_HTTP_HOST: '127.0.0.1',
      SVC_HTTP_PORT: String(await freePort()),
      SVC_GRPC_PORT: '0',
      SVC_PROXY_HOST: '127.0.0.1',
      SVC_PROXY_PORT: String(await freePort()),
      SVC_PROXY_ADMIN_PORT: String(await freePort()),
      SVC_BOOTSTRAP_ADMIN_KEY: ROOT,
      SVC_LOG_LEVEL: 'warn',
      SVC_PROXY_IDLE_GC_MS: '300',
      SVC_UPSTREAM_OVERRIDES: `api.openai.com=http://127.0.0.1:${sim.port}`,
    };
    running = await startStandalone(env);
  }, 60_000);
  afterAll(async () => {
    await stop(running);
    await sim.close();
    await database?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const rest = async (path: string) => {
    const res = await fetch(`${running.printed['control plane']}${path}`, {
      headers: { 'x-api-key': ROOT, 'x-tenant-id': 'default' },
    });
    return { status: res.status, body: (await res.json()) as any };
  };

  it('prints the sidecar identity, the CA and a trust bundle at first start', () => {
    expect(running.printed).toMatchObject({
      tenant: 'default',
      'sidecar API key': expect.stringMatching(/^svc_/),
      'proxy CA': join(dataDir, 'proxy-ca', 'ca.pem'),
    });
    expect(running.printed['trust bundle']).toBe(join(dataDir, 'proxy-ca', 'ca-bundle.pem'));
  });

  it('governs an unmodified agent using HTTPS_PROXY: answer unchanged, envelope priced from the table', async () => {
    const answer = await agentCall(running.printed.proxy!, running.printed['proxy CA']!);
    expect(answer.content.length).toBeGreaterThan(0);
    const sent = sim.requests.find((r) => r.path === '/v1/chat/completions');
    expect(sent).toBeDefined();
    expect(Object.keys(sent!.headers).filter((h) => h.startsWith('x-svc-'))).toEqual([]);
    const expected = cost(loadPriceTable(), 'gpt-4o-mini', {
      input: answer.usage.prompt_tokens,
      output: answer.usage.completion_tokens,
      cachedInput: 0,
    }).costUsd;
    const envelope = await eventually(
      () => rest(`/v1/envelopes/${answer.envelopeId}`),
      (r) => r.status === 200 && r.body.cost_summary.llm_calls === 1,
      10_000,
    );
    expect(envelope.body.cost_summary).toMatchObject({
      tokens_input: answer.usage.prompt_tokens,
      tokens_output: answer.usage.completion_tokens,
      llm_calls: 1,
    });
    expect(envelope.body.cost_summary.cost_usd).toBeCloseTo(expected, 6);
  });

  it("gives the proxy's memory back once idle, as the sidecar does", async () => {
    const collections = async () => {
      const res = await fetch(`http://127.0.0.1:${env.SVC_PROXY_ADMIN_PORT}/metrics`);
      return Number(/^svc_proxy_idle_gc_total (\d+)$/m.exec(await res.text())?.[1] ?? 0);
    };
    await eventually(collections, (n) => n >= 1, 10_000);
  });

  it('keeps its identity and state across a restart', async () => {
    const before = running.printed;
    await stop(running);
    running = await startStandalone(env);
    expect(running.printed).toMatchObject({
      'sidecar API key': before['sidecar API key'],
      'default budget': before['default budget'],
    });
    const envelopes = await rest('/v1/envelopes');
    expect(envelopes.body.length).toBeGreaterThanOrEqual(1);
  }, 60_000);
});
