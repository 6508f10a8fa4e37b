import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'node:tls';
import { X509Certificate } from 'node:crypto';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { parseInjectionTemplate } from '../../control-plane/injector/injection-template.ts';
import { InjectionWebhook } from '../../control-plane/injector/webhook-server.ts';
import { generateCa } from '../../proxy/tls/ca-generate.ts';

const ROOT = new URL('../..', import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), 'webhook-lifecycle-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const TEMPLATE = {
  sidecar: { image: 'agent-governance:1.0.0', args: ['dist/proxy/main.js'] },
  caSecretName: 'proxy-ca',
};

/** The fingerprint of the certificate the server presents to a new connection. */
function served(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, rejectUnauthorized: false }, () => {
      resolve(socket.getPeerX509Certificate()!.fingerprint256);
      socket.end();
    });
    socket.on('error', reject);
  });
}

describe('the injector process and its serving certificate', () => {
  it('serves a rotated certificate (cert-manager renews it in place) without a restart, and keeps the old one over a broken pair', async () => {
    const first = await generateCa('webhook one');
    const second = await generateCa('webhook two');
    const cert = join(dir, 'tls.crt');
    const key = join(dir, 'tls.key');
    writeFileSync(cert, first.certPem);
    writeFileSync(key, first.keyPem);
    const webhook = new InjectionWebhook({
      host: '127.0.0.1',
      port: 0,
      certFile: cert,
      keyFile: key,
      template: parseInjectionTemplate(TEMPLATE),
      logger: pino({ level: 'silent' }),
    });
    const { port } = await webhook.listen();
    try {
      expect(await served(port)).toBe(new X509Certificate(first.certPem).fingerprint256);
      expect(webhook.reloadCertificate()).toBe(false);
      // Half-written: the new certificate with the old key. Refused, the current pair stays.
      writeFileSync(cert, second.certPem);
      expect(webhook.reloadCertificate()).toBe(false);
      expect(await served(port)).toBe(new X509Certificate(first.certPem).fingerprint256);
      writeFileSync(key, second.keyPem);
      expect(webhook.reloadCertificate()).toBe(true);
      expect(await served(port)).toBe(new X509Certificate(second.certPem).fingerprint256);
    } finally {
      await webhook.close();
    }
  });

  it('stops at start naming the setting that is missing or wrong', () => {
    const start = (env: Record<string, string>) =>
      spawnSync(process.execPath, ['control-plane/injector/main.ts'], {
        cwd: ROOT,
        env: { PATH: process.env.PATH, SVC_HTTP_HOST: '127.0.0.1', SVC_INJECTOR_PORT: '0', ...env },
        encoding: 'utf8',
        timeout: 15_000,
      });
    const noCert = start({});
    expect(noCert.status).toBe(1);
    expect(noCert.stderr).toContain('SVC_INJECTOR_TLS_CERT_FILE: required for the injector');
    const template = join(dir, 'template.json');
    writeFileSync(template, JSON.stringify({ ...TEMPLATE, sidecar: { ...TEMPLATE.sidecar, proxyPort: 70000 } }));
    const bad = start({
      SVC_INJECTOR_TLS_CERT_FILE: join(dir, 'tls.crt'),
      SVC_INJECTOR_TLS_KEY_FILE: join(dir, 'tls.key'),
      SVC_INJECTOR_TEMPLATE_FILE: template,
    });
    expect(bad.status).toBe(1);
    expect(bad.stderr).toContain('sidecar.proxyPort');
  });
});
