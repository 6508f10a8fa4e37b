import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer, type Server } from 'node:net';
import { connect, TLSSocket } from 'node:tls';
import { X509Certificate } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isSvcError } from '../../core/errors/index.ts';
import { generateCa } from '../../proxy/tls/ca-generate.ts';
import { LeafCertificateCache, loadOrCreateCa } from '../../proxy/tls/index.ts';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'proxy-ca-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('loadOrCreateCa', () => {
  it('generates a CA once, writes the key with mode 0600, and reloads the same CA afterwards', async () => {
    const files = { certFile: join(dir, 'ca.crt'), keyFile: join(dir, 'sub', 'ca.key'), allowGenerate: true };
    const first = await loadOrCreateCa(files);
    expect(first.generated).toBe(true);
    expect((await stat(files.keyFile)).mode & 0o777).toBe(0o600);
    const cert = new X509Certificate(first.certPem);
    expect(cert.ca).toBe(true);
    expect(cert.publicKey.asymmetricKeyDetails?.namedCurve).toBe('prime256v1');
    const years = (Date.parse(cert.validTo) - Date.parse(cert.validFrom)) / (365 * 24 * 3600 * 1000);
    expect(years).toBeGreaterThan(9.9);

    const second = await loadOrCreateCa(files);
    expect(second.generated).toBe(false);
    expect(second.certPem).toBe(first.certPem);
    expect(second.keyPem).toBe(await readFile(files.keyFile, 'utf8'));
  });

  it('refuses to regenerate half a CA: a lone certificate without its key fails with SVC-SYS-9001 naming the key file', async () => {
    const files = { certFile: join(dir, 'ca.crt'), keyFile: join(dir, 'ca.key'), allowGenerate: true };
    await loadOrCreateCa(files);
    await rm(files.keyFile);
    const error: unknown = await loadOrCreateCa(files).catch((e: unknown) => e);
    expect(isSvcError(error) && error.code).toBe('SVC-SYS-9001');
    expect((error as Error).message).toContain(files.keyFile);
  });

  it('fails with SVC-SYS-9001 naming the missing file when generation is not allowed', async () => {
    const certFile = join(dir, 'absent.crt');
    const error: unknown = await loadOrCreateCa({
      certFile,
      keyFile: join(dir, 'absent.key'),
      allowGenerate: false,
    }).catch((e: unknown) => e);
    expect(isSvcError(error) && error.code).toBe('SVC-SYS-9001');
    expect((error as Error).message).toContain(certFile);
  });
});

async function servedCertificate(
  context: Awaited<ReturnType<LeafCertificateCache['secureContextFor']>>,
  caPem: string,
  host: string,
) {
  // Served the way the listener serves an intercepted CONNECT: a TLS socket around a plain one.
  const server: Server = createServer((plain) => {
    new TLSSocket(plain, { isServer: true, secureContext: context }).on('error', () => plain.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  try {
    const socket: TLSSocket = connect({
      host: '127.0.0.1',
      port,
      ca: caPem,
      servername: host === '127.0.0.1' ? undefined : host,
      checkServerIdentity: () => undefined,
    });
    await new Promise<void>((resolve, reject) => socket.once('secureConnect', resolve).once('error', reject));
    const peer = socket.getPeerX509Certificate();
    socket.destroy();
    return { authorized: socket.authorized, peer };
  } finally {
    server.close();
  }
}

describe('LeafCertificateCache', () => {
  it('serves a leaf for a DNS name and an IP address that verifies against the CA', async () => {
    const ca = await generateCa();
    const cache = await LeafCertificateCache.create({ caCertPem: ca.certPem, caKeyPem: ca.keyPem });
    const dns = await servedCertificate(await cache.secureContextFor('api.openai.com'), ca.certPem, 'api.openai.com');
    expect(dns.authorized).toBe(true);
    expect(dns.peer?.checkHost('api.openai.com')).toBe('api.openai.com');
    expect(dns.peer?.keyUsage).toContain('1.3.6.1.5.5.7.3.1');
    const ip = await servedCertificate(await cache.secureContextFor('127.0.0.1'), ca.certPem, '127.0.0.1');
    expect(ip.authorized).toBe(true);
    expect(ip.peer?.checkIP('127.0.0.1')).toBe('127.0.0.1');
    // One process-wide key: both leaves carry the same public key.
    expect(dns.peer?.publicKey.export({ format: 'jwk' })).toEqual(ip.peer?.publicKey.export({ format: 'jwk' }));
  });

  it('reuses a cached leaf, shares one minting between concurrent callers, and stays within its bound', async () => {
    const ca = await generateCa();
    const cache = await LeafCertificateCache.create({ caCertPem: ca.certPem, caKeyPem: ca.keyPem, maxEntries: 2 });
    const [a1, a2] = await Promise.all([cache.secureContextFor('a.example'), cache.secureContextFor('A.example')]);
    expect(a1).toBe(a2);
    expect(cache.stats.minted).toBe(1);
    expect(await cache.secureContextFor('a.example')).toBe(a1);
    await cache.secureContextFor('b.example');
    await cache.secureContextFor('c.example');
    expect(cache.stats).toEqual({ size: 2, minted: 3 });
    // a.example was the least recently used, so it was evicted and is minted anew.
    expect(await cache.secureContextFor('a.example')).not.toBe(a1);
    expect(cache.stats.minted).toBe(4);
  });

  it('accepts a CA whose key openssl wrote in SEC1 form', async () => {
    const { execFileSync } = await import('node:child_process');
    const keyFile = join(dir, 'ec.key');
    const certFile = join(dir, 'ec.crt');
    execFileSync('openssl', ['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', keyFile]);
    execFileSync('openssl', [
      'req',
      '-x509',
      '-new',
      '-key',
      keyFile,
      '-subj',
      '/CN=Openssl CA',
      '-days',
      '30',
      '-out',
      certFile,
      '-addext',
      'basicConstraints=critical,CA:true',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign',
    ]);
    const loaded = await loadOrCreateCa({ certFile, keyFile, allowGenerate: false });
    const cache = await LeafCertificateCache.create({ caCertPem: loaded.certPem, caKeyPem: loaded.keyPem });
    const served = await servedCertificate(
      await cache.secureContextFor('example.test'),
      loaded.certPem,
      'example.test',
    );
    expect(served.authorized).toBe(true);
    // The leaf never outlives its CA.
    expect(Date.parse(served.peer?.validTo ?? '')).toBeLessThanOrEqual(
      Date.parse(new X509Certificate(loaded.certPem).validTo),
    );
  });
});

describe('LeafCertificateCache at start', () => {
  it('refuses a CA whose certificate is not valid PEM with SVC-SYS-9001, before any interception', async () => {
    const ca = await generateCa();
    const error: unknown = await LeafCertificateCache.create({
      caCertPem: ca.certPem.replace(/[A-Za-z]{8}/, 'AAAAAAAA'),
      caKeyPem: ca.keyPem,
    }).catch((e: unknown) => e);
    expect(isSvcError(error) && error.code).toBe('SVC-SYS-9001');
    expect((error as Error).message).toContain('proxy CA is not valid PEM');
  });

  it('refuses a CA key of a type it cannot sign with (Ed25519) with SVC-SYS-9001', async () => {
    const { execFileSync } = await import('node:child_process');
    const keyFile = join(dir, 'ed.key');
    const certFile = join(dir, 'ed.crt');
    execFileSync('openssl', ['genpkey', '-algorithm', 'ed25519', '-out', keyFile]);
    execFileSync('openssl', [
      'req',
      '-x509',
      '-new',
      '-key',
      keyFile,
      '-subj',
      '/CN=Ed CA',
      '-days',
      '1',
      '-out',
      certFile,
    ]);
    const error: unknown = await LeafCertificateCache.create({
      caCertPem: await readFile(certFile, 'utf8'),
      caKeyPem: await readFile(keyFile, 'utf8'),
    }).catch((e: unknown) => e);
    expect(isSvcError(error) && error.code).toBe('SVC-SYS-9001');
    expect((error as Error).message).toContain('ed25519');
  });

  it('loads the certificate library on the first minting, not when the cache is made', async () => {
    // A fresh process, since this one has loaded the library already; module hooks record every load.
    const ca = await generateCa();
    const script = `
      import { registerHooks } from 'node:module';
      const loaded = [];
      registerHooks({ load(url, context, next) { loaded.push(url); return next(url, context); } });
      const x509 = () => loaded.some((url) => url.includes('@peculiar/x509'));
      const { LeafCertificateCache } = await import(${JSON.stringify(new URL('../../proxy/tls/index.ts', import.meta.url).href)});
      const cache = await LeafCertificateCache.create(${JSON.stringify({ caCertPem: ca.certPem, caKeyPem: ca.keyPem })});
      const atStart = x509();
      await cache.secureContextFor('api.openai.com');
      console.log(JSON.stringify({ atStart, afterMint: x509(), minted: cache.stats.minted }));
    `;
    const { execFileSync } = await import('node:child_process');
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
    expect(JSON.parse(out)).toEqual({ atStart: false, afterMint: true, minted: 1 });
  });
});
