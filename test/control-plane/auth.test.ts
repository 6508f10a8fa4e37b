import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, exportSPKI, generateKeyPair, SignJWT, type CryptoKey } from 'jose';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  expectSvcError,
  startControlPlane,
  tenantWithKey,
  type RunningControlPlane,
} from '../harness/control-plane.ts';

let cp: RunningControlPlane;
afterEach(async () => cp.close());

const budgetBody = { name: 'b', type: 'cost', limits: { max_cost_usd: 1 } };

describe('API key lifecycle', () => {
  it('shows the secret once, keeps only a hash, lists masked hints, and honours revocation and expiry', async () => {
    cp = await startControlPlane();
    const admin = await tenantWithKey(cp, 'acme');
    const created = await cp.call('POST', '/v1/api-keys', {
      key: admin,
      body: { name: 'ci', scopes: ['budgets:read'], expires_in_seconds: 1 },
    });
    expect(created.status).toBe(201);
    const {
      id,
      key_secret: secret,
      key_hint: hint,
      prefix,
    } = created.body as { id: string; key_secret: string; key_hint: string; prefix: string };
    expect(secret.length).toBeGreaterThan(40);
    expect(secret.startsWith(prefix)).toBe(true);
    expect(secret.endsWith(hint.slice(-4))).toBe(true);
    expect(Date.parse(created.body.expires_at as string) - Date.parse(created.body.created_at as string)).toBe(1000);

    const hash = createHash('sha256').update(secret).digest('hex');
    const listed = await cp.call('GET', '/v1/api-keys', { key: admin });
    const view = (listed.body as Array<Record<string, unknown>>).find((k) => k.id === id);
    expect(view).toMatchObject({ name: 'ci', key_hint: hint, prefix, scopes: ['budgets:read'], status: 'active' });
    expect(view).not.toHaveProperty('key_secret');
    expect(view).not.toHaveProperty('key_hash');
    expect(JSON.stringify(listed.body)).not.toContain(secret.slice(prefix.length));
    expect(JSON.stringify(listed.body)).not.toContain(hash);
    const stored = await cp.plane.storage.read.apiKeys.get('acme', id);
    expect(stored?.key_hash).toBe(hash);
    expect(JSON.stringify(stored)).not.toContain(secret);

    expect((await cp.call('GET', '/v1/budgets', { key: secret })).status).toBe(200);
    await new Promise((r) => setTimeout(r, 1100));
    expectSvcError(await cp.call('GET', '/v1/budgets', { key: secret }), 401, 'SVC-SYS-9003');
    const later = (await cp.call('GET', '/v1/api-keys', { key: admin })).body as Array<Record<string, unknown>>;
    expect(later.find((k) => k.id === id)?.status).toBe('expired');

    const other = (
      await cp.call('POST', '/v1/api-keys', { key: admin, body: { name: 'doomed', scopes: ['budgets:read'] } })
    ).body as { id: string; key_secret: string; expires_at: unknown };
    expect(other.expires_at).toBeNull();
    expect((await cp.call('GET', '/v1/budgets', { key: other.key_secret })).status).toBe(200);
    const revoked = await cp.call('DELETE', `/v1/api-keys/${other.id}`, { key: admin });
    expect(revoked.body).toMatchObject({ id: other.id, status: 'revoked' });
    expect(revoked.body).not.toHaveProperty('key_secret');
    expectSvcError(await cp.call('GET', '/v1/budgets', { key: other.key_secret }), 401, 'SVC-SYS-9003');
    expect((await cp.call('GET', '/v1/budgets', { key: admin })).status).toBe(200);
  });

  it('accepts an API key as Authorization: Bearer just like X-Api-Key', async () => {
    cp = await startControlPlane();
    const admin = await tenantWithKey(cp, 'acme');
    const bearer = (key: string) => ({ key: null, headers: { authorization: `Bearer ${key}` } });
    const created = await cp.call('POST', '/v1/budgets', { ...bearer(admin), body: budgetBody });
    expect(created.status).toBe(201);
    expect(created.body.tenant_id).toBe('acme');
    const listed = await cp.call('GET', '/v1/budgets', bearer(admin));
    expect(listed.body).toEqual((await cp.call('GET', '/v1/budgets', { key: admin })).body);
    expectSvcError(await cp.call('GET', '/v1/budgets', bearer(`${admin}x`)), 401, 'SVC-SYS-9003');
    expectSvcError(
      await cp.call('GET', '/v1/budgets', { key: null, headers: { authorization: `Basic ${admin}` } }),
      401,
      'SVC-SYS-9003',
    );
  });
});

describe('keys created with a key', () => {
  it("expire by the creating key's expiry, when it has one; the root key and keys without expiry are not capped", async () => {
    cp = await startControlPlane();
    const admin = await tenantWithKey(cp, 'acme');
    const names = async () =>
      ((await cp.call('GET', '/v1/api-keys', { key: admin })).body as Array<{ name: string }>).map((k) => k.name);
    const expiring = await cp.call('POST', '/v1/api-keys', {
      key: admin,
      body: { name: 'week', scopes: ['admin'], expires_in_seconds: 600 },
    });
    expect(expiring.status).toBe(201);
    const week = expiring.body.key_secret as string;
    const before = await names();
    for (const body of [
      { name: 'forever', scopes: ['budgets:read'] },
      { name: 'forever', scopes: ['budgets:read'], expires_in_seconds: 0 },
      { name: 'longer', scopes: ['budgets:read'], expires_in_seconds: 3600 },
    ]) {
      const refused = await cp.call('POST', '/v1/api-keys', { key: week, body });
      expectSvcError(refused, 400, 'SVC-SYS-9002');
      expect(refused.body.error.details.field_violations.map((v: { field: string }) => v.field)).toEqual([
        'expires_in_seconds',
      ]);
      expect(refused.body.error.message).toContain("the creating key's expires_at");
    }
    expect(await names()).toEqual(before);
    const audit = await cp.call('GET', '/v1/audit?action=api_key.create', { headers: { 'x-tenant-id': 'acme' } });
    expect((audit.body as Array<{ metadata: { name: string } }>).map((r) => r.metadata.name)).not.toContain('longer');

    const bounded = await cp.call('POST', '/v1/api-keys', {
      key: week,
      body: { name: 'bounded', scopes: ['budgets:read'], expires_in_seconds: 300 },
    });
    expect(bounded.status).toBe(201);
    expect(Date.parse(bounded.body.expires_at as string)).toBeLessThanOrEqual(
      Date.parse(expiring.body.expires_at as string),
    );
    expect((await cp.call('GET', '/v1/budgets', { key: bounded.body.key_secret as string })).status).toBe(200);
    // A key without expiry, and the root key, create keys for as long as they like.
    const unbounded = await cp.call('POST', '/v1/api-keys', { key: admin, body: { name: 'long', scopes: ['admin'] } });
    expect(unbounded.body.expires_at).toBeNull();
    const fromRoot = await cp.call('POST', '/v1/api-keys', {
      headers: { 'x-tenant-id': 'acme' },
      body: { name: 'ten-years', scopes: ['admin'], expires_in_seconds: 315_360_000 },
    });
    expect(fromRoot.status).toBe(201);
  });

  it("stay within the creating key's scopes and tenant", async () => {
    cp = await startControlPlane();
    const admin = await tenantWithKey(cp, 'acme');
    await tenantWithKey(cp, 'globex');
    const writer = await tenantWithKey(cp, 'acme', ['envelopes:write', 'policies:write', 'budgets:write']);
    const keysOf = async (tenant: string) =>
      ((await cp.call('GET', '/v1/api-keys', { headers: { 'x-tenant-id': tenant } })).body as Array<{ id: string }>)
        .map((k) => k.id)
        .sort();
    const before = { acme: await keysOf('acme'), globex: await keysOf('globex'), system: await keysOf('system') };
    // Creating a key takes admin, which a key without it cannot hand out or get itself.
    for (const scopes of [['admin'], ['envelopes:write']]) {
      const refused = await cp.call('POST', '/v1/api-keys', { key: writer, body: { name: 'mine', scopes } });
      expect(expectSvcError(refused, 403, 'SVC-SYS-9004').details).toMatchObject({ required_scope: 'admin' });
    }
    // A tenant's admin key acts in its tenant only, the platform's included.
    for (const tenant of ['globex', 'system']) {
      const named = await cp.call('POST', '/v1/api-keys', {
        key: admin,
        headers: { 'x-tenant-id': tenant },
        body: { name: 'theirs', scopes: ['admin'] },
      });
      expectSvcError(named, 403, 'SVC-SYS-9004');
    }
    const inBody = await cp.call('POST', '/v1/api-keys', {
      key: admin,
      body: { name: 'theirs', scopes: ['admin'], tenant_id: 'globex' },
    });
    // The tenant is no field of a key request: naming one is refused as such.
    expectSvcError(inBody, 400, 'SVC-SYS-9002');
    expect(inBody.body.error.details.field_violations).toEqual([
      { field: '(body)', description: 'Unrecognized key: "tenant_id"' },
    ]);
    expect({ acme: await keysOf('acme'), globex: await keysOf('globex'), system: await keysOf('system') }).toEqual(
      before,
    );
  });
});

describe('revoking a key', () => {
  it('revokes the keys it created and theirs, in any tenant; keys made otherwise stay', async () => {
    cp = await startControlPlane();
    await tenantWithKey(cp, 'acme');
    const create = async (key: string | undefined, name: string, tenant = 'system') => {
      const created = await cp.call('POST', '/v1/api-keys', {
        ...(key === undefined ? {} : { key }),
        headers: { 'x-tenant-id': tenant },
        body: { name, scopes: ['admin'] },
      });
      expect(created.status).toBe(201);
      return created.body as { id: string; key_secret: string };
    };
    const k1 = await create(undefined, 'k1');
    const k2 = await create(k1.key_secret, 'k2');
    const k3 = await create(k2.key_secret, 'k3');
    // A platform key creates keys for other tenants: those are its own too.
    const abroad = await create(k2.key_secret, 'abroad', 'acme');
    const sibling = await create(undefined, 'sibling');
    const works = async (key: string) => (await cp.call('GET', '/v1/budgets', { key })).status;
    for (const key of [k1, k2, k3, abroad, sibling]) expect(await works(key.key_secret)).toBe(200);
    // A request of k3's that authenticated before the revocation and creates its key after it.
    const inFlight = await cp.plane.services.keys.authenticate(k3.key_secret, new Date());

    expect((await cp.call('DELETE', `/v1/api-keys/${k1.id}`, { headers: { 'x-tenant-id': 'system' } })).status).toBe(
      200,
    );
    for (const key of [k1, k2, k3, abroad])
      expectSvcError(await cp.call('GET', '/v1/budgets', { key: key.key_secret }), 401, 'SVC-SYS-9003');
    expect(await works(sibling.key_secret)).toBe(200);
    await expect(
      cp.plane.storage.withTransaction((tx) =>
        cp.plane.services.keys.create(
          tx,
          'system',
          { name: 'late', scopes: ['admin'], expires_in_seconds: 0 },
          new Date(),
          inFlight!,
        ),
      ),
    ).rejects.toMatchObject({ code: 'SVC-SYS-9003' });
    const statuses = async (tenant: string) =>
      (
        (await cp.call('GET', '/v1/api-keys', { headers: { 'x-tenant-id': tenant } })).body as Array<{
          name: string;
          status: string;
        }>
      )
        .map((k) => `${k.name}:${k.status}`)
        .sort();
    expect(await statuses('system')).toEqual(
      expect.arrayContaining(['k1:revoked', 'k2:revoked', 'k3:revoked', 'sibling:active']),
    );
    expect(await statuses('acme')).toContain('abroad:revoked');
  });
});

describe('only a platform administrator creates tenants', () => {
  it("refuses a tenant's admin key and accepts the root key", async () => {
    cp = await startControlPlane();
    const admin = await tenantWithKey(cp, 'acme');
    expectSvcError(
      await cp.call('POST', '/v1/tenants', { key: admin, body: { tenant_id: 'rogue', name: 'rogue' } }),
      403,
      'SVC-SYS-9004',
    );
    expectSvcError(await cp.call('GET', '/v1/tenants', { key: admin }), 403, 'SVC-SYS-9004');
    expect(
      ((await cp.call('GET', '/v1/tenants')).body as Array<{ tenant_id: string }>).map((t) => t.tenant_id),
    ).toEqual(['acme']);
    const created = await cp.call('POST', '/v1/tenants', { body: { tenant_id: 'initech', name: 'Initech' } });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ tenant_id: 'initech', name: 'Initech' });
    expectSvcError(
      await cp.call('POST', '/v1/tenants', { body: { tenant_id: 'initech', name: 'again' } }),
      409,
      'SVC-SYS-9008',
    );
    // The platform administrators' own tenant cannot be claimed.
    expectSvcError(
      await cp.call('POST', '/v1/tenants', { body: { tenant_id: 'system', name: 'mine now' } }),
      409,
      'SVC-SYS-9008',
    );
  });
});

describe('JWTs from an identity provider', () => {
  const issuer = 'https://idp.test/';
  const audience = 'governance-api';
  let jwks: Server;
  let jwksUrl: string;
  let signingKey: CryptoKey;
  let strangerKey: CryptoKey;
  /** The published RSA key as PEM: what an algorithm-confusion attack uses as an HMAC secret. */
  let publicPem: string;
  /**
   * A symmetric key the key set carries by mistake. jose's key set never hands one out, and the
   * algorithm allow-list refuses HS* before any key is looked up: either alone keeps it from
   * verifying a token.
   */
  const leakedSecret = new TextEncoder().encode('a-shared-secret-that-no-jwks-should-ever-publish');

  beforeAll(async () => {
    const pair = await generateKeyPair('RS256', { extractable: true });
    signingKey = pair.privateKey;
    strangerKey = (await generateKeyPair('RS256')).privateKey;
    publicPem = await exportSPKI(pair.publicKey);
    const jwk = { ...(await exportJWK(pair.publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
    const oct = { ...(await exportJWK(leakedSecret)), kid: 'k-oct', use: 'sig' };
    jwks = createServer((_req, res) => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ keys: [jwk, oct] }));
    });
    await new Promise<void>((r) => jwks.listen(0, '127.0.0.1', r));
    jwksUrl = `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/.well-known/jwks.json`;
  });
  afterAll(async () => new Promise<void>((r) => jwks.close(() => r())));

  interface TokenOptions {
    tenant?: string;
    scope?: string;
    iss?: string;
    aud?: string;
    /** `null` leaves the claim out. */
    exp?: number | string | null;
    iat?: number | null;
    key?: CryptoKey;
  }
  const token = (o: TokenOptions = {}) => {
    let jwt = new SignJWT({ tenant_id: o.tenant ?? 'acme', scope: o.scope ?? 'budgets:read budgets:write' })
      .setProtectedHeader({ alg: 'RS256', kid: 'k1' })
      .setSubject('alice@acme')
      .setIssuer(o.iss ?? issuer)
      .setAudience(o.aud ?? audience);
    if (o.iat !== null) jwt = jwt.setIssuedAt(o.iat);
    if (o.exp !== null) jwt = jwt.setExpirationTime(o.exp ?? '5m');
    return jwt.sign(o.key ?? signingKey);
  };
  const asJwt = async (o: TokenOptions = {}) => ({ key: null, headers: { authorization: `Bearer ${await token(o)}` } });

  async function start(): Promise<void> {
    cp = await startControlPlane({ jwt_jwks_url: jwksUrl, jwt_issuer: issuer, jwt_audience: audience });
    await tenantWithKey(cp, 'acme');
    await tenantWithKey(cp, 'globex');
  }

  it('acts for the tenant of its tenant_id claim with the scopes of its scope claim', async () => {
    await start();
    const created = await cp.call('POST', '/v1/budgets', { ...(await asJwt()), body: budgetBody });
    expect(created.status).toBe(201);
    expect(created.body.tenant_id).toBe('acme');
    expect((await cp.call('GET', `/v1/budgets/${created.body.budget_id}`, await asJwt())).status).toBe(200);
    expectSvcError(
      await cp.call('POST', '/v1/policies', {
        ...(await asJwt()),
        body: { name: 'p', rules: [{ action: '*', effect: 'deny' }] },
      }),
      403,
      'SVC-SYS-9004',
    );
    const readOnly = await cp.call('POST', '/v1/budgets', {
      ...(await asJwt({ scope: 'budgets:read' })),
      body: budgetBody,
    });
    expectSvcError(readOnly, 403, 'SVC-SYS-9004');
    const audit = await cp.call('GET', '/v1/audit?action=budget.create', { headers: { 'x-tenant-id': 'acme' } });
    expect((audit.body as Array<{ actor: unknown }>).map((r) => r.actor)).toEqual([{ type: 'jwt', id: 'alice@acme' }]);
  });

  it('refuses a wrong issuer, wrong audience, expired or foreign-signed token with 401', async () => {
    await start();
    const past = Math.floor(Date.now() / 1000) - 60;
    for (const [what, options] of [
      ['issuer', { iss: 'https://evil.test/' }],
      ['audience', { aud: 'other-api' }],
      ['expired', { exp: past }],
      ['signature', { key: strangerKey }],
    ] as const) {
      const res = await cp.call('GET', '/v1/budgets', await asJwt(options));
      expect(res.status, what).toBe(401);
      expectSvcError(res, 401, 'SVC-SYS-9003');
    }
    const good = await token();
    const [header, payload] = good.split('.');
    const forged = `${header}.${Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(payload!, 'base64url').toString()), tenant_id: 'globex' })).toString('base64url')}.${good.split('.')[2]}`;
    expectSvcError(
      await cp.call('GET', '/v1/budgets', { key: null, headers: { authorization: `Bearer ${forged}` } }),
      401,
      'SVC-SYS-9003',
    );
  });

  it('refuses an HMAC-signed token, keyed with the public key or a symmetric key of the set, and an unsigned one', async () => {
    await start();
    expect((await cp.call('GET', '/v1/budgets', await asJwt())).status).toBe(200);
    const claims = { tenant_id: 'acme', scope: 'admin' };
    const hmac = (kid: string, secret: Uint8Array) =>
      new SignJWT(claims)
        .setProtectedHeader({ alg: 'HS256', kid })
        .setSubject('mallory')
        .setIssuer(issuer)
        .setAudience(audience)
        .setIssuedAt()
        .setExpirationTime('5m')
        .sign(secret);
    const part = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
    const now = Math.floor(Date.now() / 1000);
    const payload = part({ ...claims, sub: 'mallory', iss: issuer, aud: audience, iat: now, exp: now + 300 });
    for (const [what, forged] of [
      // The classic confusion: a verifier that let the token pick HS256 would take the RSA key as the secret.
      ['HS256 keyed with the public key', await hmac('k1', new TextEncoder().encode(publicPem))],
      ['HS256 keyed with a symmetric key the set publishes', await hmac('k-oct', leakedSecret)],
      ['alg none, empty signature', `${part({ alg: 'none' })}.${payload}.`],
      ['alg none, some signature', `${part({ alg: 'none', kid: 'k1' })}.${payload}.${part({ sig: 1 })}`],
    ] as const) {
      const res = await cp.call('GET', '/v1/budgets', { key: null, headers: { authorization: `Bearer ${forged}` } });
      expect(res.status, what).toBe(401);
      expectSvcError(res, 401, 'SVC-SYS-9003');
      const created = await cp.call('POST', '/v1/api-keys', {
        key: null,
        headers: { authorization: `Bearer ${forged}` },
        body: { name: 'forged', scopes: ['admin'], expires_in_seconds: 60 },
      });
      expect(created.status, what).toBe(401);
    }
    const keys = await cp.call('GET', '/v1/api-keys', { headers: { 'x-tenant-id': 'acme' } });
    expect((keys.body as Array<{ name: string }>).map((k) => k.name)).toEqual(['acme-key']);
  });

  it('refuses a token that never expires, lives longer than allowed or was issued in the future', async () => {
    await start();
    const now = Math.floor(Date.now() / 1000);
    for (const [what, options] of [
      ['no exp', { exp: null }],
      ['no iat', { iat: null }],
      ['iat in the future', { iat: now + 3600, exp: now + 7200 }],
      ['lifetime over SVC_JWT_MAX_LIFETIME_SECONDS', { exp: '2d' }],
      ['lifetime over it, iat long ago', { iat: now - 400 * 86_400, exp: now + 300 }],
    ] as const) {
      const res = await cp.call('GET', '/v1/budgets', await asJwt(options));
      expect(res.status, what).toBe(401);
      expectSvcError(res, 401, 'SVC-SYS-9003');
    }
    expect((await cp.call('GET', '/v1/budgets', await asJwt({ exp: '23h' }))).status).toBe(200);
  });

  it('refuses a token whose tenant claim is no tenant id, or names a tenant that does not exist', async () => {
    await start();
    for (const tenant of ['ghost', '../acme', 'a'.repeat(65), '']) {
      const res = await cp.call('POST', '/v1/budgets', {
        ...(await asJwt({ tenant, scope: 'admin' })),
        body: budgetBody,
      });
      expectSvcError(res, 401, 'SVC-SYS-9003');
    }
    const tenants = await cp.call('GET', '/v1/tenants');
    expect((tenants.body as Array<{ tenant_id: string }>).map((t) => t.tenant_id).sort()).toEqual(['acme', 'globex']);
  });

  it("creates API keys with a JWT only when they expire by the token's exp", async () => {
    await start();
    const exp = Math.floor(Date.now() / 1000) + 600;
    const admin = async () => asJwt({ scope: 'admin', exp });
    for (const body of [
      { name: 'forever', scopes: ['budgets:read'] },
      { name: 'forever', scopes: ['budgets:read'], expires_in_seconds: 0 },
      { name: 'longer', scopes: ['budgets:read'], expires_in_seconds: 3600 },
    ]) {
      const refused = await cp.call('POST', '/v1/api-keys', { ...(await admin()), body });
      expectSvcError(refused, 400, 'SVC-SYS-9002');
      expect(refused.body.error.details.field_violations.map((v: { field: string }) => v.field)).toEqual([
        'expires_in_seconds',
      ]);
    }
    expect((await cp.call('GET', '/v1/api-keys', await admin())).body).toHaveLength(1);

    const created = await cp.call('POST', '/v1/api-keys', {
      ...(await admin()),
      body: { name: 'bounded', scopes: ['budgets:read'], expires_in_seconds: 300 },
    });
    expect(created.status).toBe(201);
    expect(Date.parse(created.body.expires_at as string)).toBeLessThanOrEqual(exp * 1000);
    expect((await cp.call('GET', '/v1/budgets', { key: created.body.key_secret as string })).status).toBe(200);
  });

  it("keeps a tenant's token out of another tenant, and only a system administrator token creates tenants", async () => {
    await start();
    const globexKey = await tenantWithKey(cp, 'globex');
    const theirs = await cp.call('POST', '/v1/budgets', { key: globexKey, body: budgetBody });
    expectSvcError(await cp.call('GET', `/v1/budgets/${theirs.body.budget_id}`, await asJwt()), 404, 'SVC-BUD-3002');
    expectSvcError(await cp.call('GET', '/v1/budgets?tenant_id=globex', await asJwt()), 403, 'SVC-SYS-9004');
    expectSvcError(
      await cp.call('GET', '/v1/budgets', {
        ...(await asJwt()),
        headers: { ...(await asJwt()).headers, 'x-tenant-id': 'globex' },
      }),
      403,
      'SVC-SYS-9004',
    );
    expect((await cp.call('GET', '/v1/budgets', await asJwt())).body).toEqual([]);

    expectSvcError(
      await cp.call('POST', '/v1/tenants', { ...(await asJwt({ scope: 'admin' })), body: { name: 'rogue' } }),
      403,
      'SVC-SYS-9004',
    );
    const platform = await cp.call('POST', '/v1/tenants', {
      ...(await asJwt({ tenant: 'system', scope: 'admin' })),
      body: { tenant_id: 'initech', name: 'Initech' },
    });
    expect(platform.status).toBe(201);
  });
});
