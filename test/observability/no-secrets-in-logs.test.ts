import Anthropic from '@anthropic-ai/sdk';
import { request as httpRequest, createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import OpenAI, { AzureOpenAI } from 'openai';
// Node's built-in fetch bundles its own undici; a dispatcher from the undici package needs that package's fetch.
import { fetch as undiciFetch, type Dispatcher } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNatsServer, type NatsServer } from '../harness/nats-server.ts';
import {
  controlPlaneProcess,
  FLEET_ROOT_KEY,
  killAllProcesses,
  proxyCa,
  proxyProcess,
  removeDirs,
  seedFleetTenant,
  type ControlPlaneProcess,
  type FleetTenant,
  type ProxyProcess,
} from '../harness/processes.ts';
import { startSimulator, type Simulator } from '../simulator/index.ts';

/**
 * Every credential a deployment handles, with values easy to find: sent through every provider
 * adapter of a real proxy process and every credential path of a real control-plane process, at
 * log level trace, on good and on failing requests. Not one may show up in either process's output.
 */
const SECRETS = {
  openai: 'sk-proj-LOGTESTopenai111111111111111111',
  anthropic: 'sk-ant-api03-LOGTESTanthropic2222222222222',
  gemini: 'AIzaLOGTESTgemini3333333333333333333333',
  azure: 'LOGTESTazure4444444444444444444444',
  compatible: 'LOGTESTcompatible555555555555555555',
  wrongKey: 'LOGTESTwrongkey66666666666666666666',
  wrongSvcKey: 'svc_0123456789abcdef_LOGTESTwrongsvcsecret77777777777777777777777',
  querySecret: 'LOGTESTquerysecret888888888888888',
  natsControlPlane: 'control-plane-secret',
  natsProxy: 'proxy-acme-secret',
  bootstrap: FLEET_ROOT_KEY,
};
const NATS_CONFIG = fileURLToPath(new URL('../../config/nats/tenant-isolation.conf', import.meta.url));

type OpenAiOptions = NonNullable<ConstructorParameters<typeof OpenAI>[0]>;
type AnthropicOptions = NonNullable<ConstructorParameters<typeof Anthropic>[0]>;
type AzureOptions = NonNullable<ConstructorParameters<typeof AzureOpenAI>[0]>;
const via = (dispatcher: Dispatcher) => ({
  fetch: undiciFetch as unknown as OpenAiOptions['fetch'],
  fetchOptions: { dispatcher } as unknown as OpenAiOptions['fetchOptions'],
  maxRetries: 0,
});

let nats: NatsServer;
let sim: Simulator;
let jwks: Server;
let cp: ControlPlaneProcess;
let proxy: ProxyProcess;
let tenant: FleetTenant;
let jwt: string;
let foreignJwt: string;
const caDir = mkdtempSync(join(tmpdir(), 'logs-ca-'));

async function signedJwt(): Promise<{ good: string; foreign: string; jwksJson: string }> {
  const { publicKey, privateKey } = await generateKeyPair('RS256');
  const other = await generateKeyPair('RS256');
  const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
  const sign = (key: Parameters<SignJWT['sign']>[0]) =>
    new SignJWT({ tenant_id: 'acme', scope: 'admin' })
      .setProtectedHeader({ alg: 'RS256', kid: 'k1' })
      .setSubject('alice')
      .setIssuer('https://idp.test/')
      .setAudience('governance-api')
      .setIssuedAt()
      .setExpirationTime('10m')
      .sign(key);
  return {
    good: await sign(privateKey),
    foreign: await sign(other.privateKey),
    jwksJson: JSON.stringify({ keys: [jwk] }),
  };
}

beforeAll(async () => {
  nats = await startNatsServer({ configFile: NATS_CONFIG });
  sim = await startSimulator();
  const keys = await signedJwt();
  jwt = keys.good;
  foreignJwt = keys.foreign;
  jwks = createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(keys.jwksJson));
  await new Promise<void>((r) => jwks.listen(0, '127.0.0.1', r));
  const withCredentials = (user: string, password: string) =>
    nats.url.replace('nats://', `nats://${user}:${password}@`);
  cp = await controlPlaneProcess(withCredentials('control-plane', SECRETS.natsControlPlane), {
    SVC_LOG_LEVEL: 'trace',
    SVC_JWT_JWKS_URL: `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/jwks.json`,
    SVC_JWT_ISSUER: 'https://idp.test/',
    SVC_JWT_AUDIENCE: 'governance-api',
  });
  await cp.start();
  tenant = await seedFleetTenant(cp, 'acme', { max_cost_usd: 100 });
  const simHost = sim.url;
  proxy = await proxyProcess({
    natsUrl: withCredentials('proxy-acme', SECRETS.natsProxy),
    tenant,
    ca: await proxyCa(caDir),
    openAiUpstream: sim.url,
    env: {
      SVC_LOG_LEVEL: 'trace',
      SVC_UPSTREAM_OVERRIDES: [
        ...['api.openai.com', 'api.anthropic.com', 'generativelanguage.googleapis.com', 'myres.openai.azure.com'].map(
          (h) => `${h}=${simHost}`,
        ),
        `compat.local=${simHost}`,
        // Nothing listens on port 1: the upstream failure path.
        'down.openai.azure.com=http://127.0.0.1:1',
      ].join(','),
      SVC_PROXY_COMPATIBLE_HOSTS: 'compat.local:8000',
    },
  });
  await proxy.start();
}, 60_000);

afterAll(async () => {
  await killAllProcesses();
  await sim?.close();
  await nats?.dispose();
  await new Promise<void>((r) => (jwks ? jwks.close(() => r()) : r()));
  await removeDirs([caDir, cp?.dataDir, proxy?.dataDir]);
});

/** A forward-mode request (absolute URI), as an HTTP_PROXY client sends it to a plain-HTTP server. */
function forward(url: string, body: string, headers: Record<string, string>): Promise<number> {
  const target = new URL(url);
  const proxyUrl = new URL(proxy.proxyUrl);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: proxyUrl.hostname,
        port: proxyUrl.port,
        method: 'POST',
        path: url,
        headers: { host: target.host, 'content-type': 'application/json', ...headers },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const chat = { model: 'gpt-4o-mini', max_tokens: 5, messages: [{ role: 'user' as const, content: 'hi' }] };

describe('no secret in any log line', () => {
  it('holds for every provider adapter and every control-plane credential, at trace level, errors included', async () => {
    const agent = proxy.agent();
    // OpenAI, through HTTPS_PROXY (CONNECT, intercepted), whole and streamed.
    const openai = new OpenAI({ apiKey: SECRETS.openai, ...via(agent) });
    await openai.chat.completions.create(chat);
    for await (const chunk of await openai.chat.completions.create({ ...chat, stream: true })) void chunk;
    // Anthropic, the same way.
    const anthropic = new Anthropic({
      apiKey: SECRETS.anthropic,
      fetch: undiciFetch as unknown as AnthropicOptions['fetch'],
      fetchOptions: { dispatcher: agent } as unknown as AnthropicOptions['fetchOptions'],
      maxRetries: 0,
    });
    await anthropic.messages.create({
      model: 'claude-3-5-haiku-latest',
      max_tokens: 5,
      messages: [{ role: 'user', content: 'hi' }],
    });
    // Gemini through the reverse route, its key in the query string.
    const gemini = await fetch(
      `${proxy.proxyUrl}/gemini/v1beta/models/gemini-2.0-flash:generateContent?key=${SECRETS.gemini}`,
      {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'hi' }] }] }),
      },
    );
    expect(gemini.status).toBe(200);
    // Azure OpenAI with its api-key header; then the same against an upstream that is down.
    const azure = (endpoint: string) =>
      new AzureOpenAI({
        endpoint,
        apiKey: SECRETS.azure,
        apiVersion: '2024-10-21',
        deployment: 'gpt-4o-mini',
        ...(via(agent) as unknown as Partial<AzureOptions>),
      });
    await azure('https://myres.openai.azure.com').chat.completions.create(chat);
    await expect(azure('https://down.openai.azure.com').chat.completions.create(chat)).rejects.toMatchObject({
      status: 502,
    });
    // An OpenAI-compatible server as a forward proxy, with a bearer key.
    expect(
      await forward('http://compat.local:8000/v1/chat/completions', JSON.stringify({ ...chat, model: 'llama-3' }), {
        authorization: `Bearer ${SECRETS.compatible}`,
      }),
    ).toBe(200);
    // A malformed body, and a bad key and a query secret on the forward path.
    const malformed = await fetch(`${proxy.proxyUrl}/openai/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${SECRETS.openai}` },
      body: '{"model": "gpt-4o-mini", "messages": [',
    });
    expect(malformed.status).toBe(400);
    await forward(`http://compat.local:8000/v1/chat/completions?api_key=${SECRETS.querySecret}`, '{', {
      'x-api-key': SECRETS.wrongKey,
    });

    // The control plane: X-Api-Key, Bearer API key, Bearer JWT, the bootstrap key (cp.rest), and
    // refused credentials, a malformed body and a secret in a query string.
    const rest = (path: string, headers: Record<string, string>, init: RequestInit = {}) =>
      fetch(cp.url + path, { ...init, headers: { 'content-type': 'application/json', ...headers } });
    expect((await rest('/v1/budgets', { 'x-api-key': tenant.apiKey })).status).toBe(200);
    expect((await rest('/v1/budgets', { authorization: `Bearer ${tenant.apiKey}` })).status).toBe(200);
    expect((await rest('/v1/budgets', { authorization: `Bearer ${jwt}` })).status).toBe(200);
    expect((await cp.rest('GET', '/v1/tenants')).status).toBe(200);
    expect((await rest('/v1/budgets', { 'x-api-key': SECRETS.wrongKey })).status).toBe(401);
    expect((await rest('/v1/budgets', { authorization: `Bearer ${SECRETS.wrongSvcKey}` })).status).toBe(401);
    expect((await rest('/v1/budgets', { authorization: `Bearer ${foreignJwt}` })).status).toBe(401);
    expect((await rest(`/v1/budgets?key=${SECRETS.querySecret}`, { authorization: `Bearer ${jwt}` })).status).toBe(200);
    const bad = await rest('/v1/budgets', { 'x-api-key': tenant.apiKey }, { method: 'POST', body: '{"name":' });
    expect(bad.status).toBe(400);

    await proxy.stop();
    await cp.stop();
    const output = { 'control plane': cp.output(), proxy: proxy.output() };
    // The runs logged plenty: the search below looks at real output.
    expect(output['control plane'].split('\n').length).toBeGreaterThan(10);
    expect(output.proxy.split('\n').length).toBeGreaterThan(5);
    const values = {
      ...SECRETS,
      tenantKey: tenant.apiKey,
      tenantKeySecretPart: tenant.apiKey.slice(-43),
      jwt,
      jwtSignature: jwt.split('.')[2] ?? jwt,
      foreignJwt,
    };
    const found: string[] = [];
    for (const [processName, text] of Object.entries(output)) {
      for (const [name, value] of Object.entries(values))
        if (text.includes(value)) found.push(`${name} in ${processName}`);
    }
    expect(found).toEqual([]);
  });
});
