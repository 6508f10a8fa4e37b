import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../harness/free-port.ts';
import { manifest, type Rendered } from '../helm/render.ts';

const ROOT = new URL('../..', import.meta.url).pathname;

export interface InjectorProcess {
  /** The injection template the chart rendered. */
  readonly template: any;
  /** Everything the process logged (pino JSON lines). */
  log(): string;
  /** POSTs an AdmissionReview body to /mutate over TLS, trusting only the chart's caBundle. */
  post(body: string | object, path?: string): Promise<{ status: number; body: any }>;
  stop(): Promise<void>;
}

/**
 * `node control-plane/injector/main.ts` (`npm run injector`) with the serving certificate, caBundle
 * and template of a chart rendering, as the chart's Deployment runs it, on a free port.
 */
export async function startInjector(
  rendered: Rendered,
  releaseNamespace = 'agent-governance',
): Promise<InjectorProcess> {
  const dir = mkdtempSync(join(tmpdir(), 'injector-'));
  const tls = manifest(rendered, 'Secret', 'ag-agent-governance-injector-tls');
  const hook = manifest(rendered, 'MutatingWebhookConfiguration', 'ag-agent-governance-injector');
  const templateJson = manifest(rendered, 'ConfigMap', 'ag-agent-governance-injector').data['template.json'] as string;
  const ca = Buffer.from(hook.webhooks[0].clientConfig.caBundle as string, 'base64');
  writeFileSync(join(dir, 'tls.crt'), Buffer.from(tls.data['tls.crt'] as string, 'base64'));
  writeFileSync(join(dir, 'tls.key'), Buffer.from(tls.data['tls.key'] as string, 'base64'));
  writeFileSync(join(dir, 'template.json'), templateJson);
  const port = await freePort();
  // The name the API server checks: the webhook Service's DNS name.
  const servername = `${hook.webhooks[0].clientConfig.service.name}.${releaseNamespace}.svc`;
  let output = '';
  const child: ChildProcess = spawn(process.execPath, ['control-plane/injector/main.ts'], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH,
      SVC_HTTP_HOST: '127.0.0.1',
      SVC_INJECTOR_PORT: String(port),
      SVC_INJECTOR_TLS_CERT_FILE: join(dir, 'tls.crt'),
      SVC_INJECTOR_TLS_KEY_FILE: join(dir, 'tls.key'),
      SVC_INJECTOR_TEMPLATE_FILE: join(dir, 'template.json'),
      SVC_LOG_LEVEL: 'info',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout?.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr?.on('data', (c: Buffer) => (output += c.toString()));

  const post = (body: string | object, path = '/mutate', method = 'POST') =>
    new Promise<{ status: number; body: any }>((resolve, reject) => {
      const payload = typeof body === 'string' ? body : JSON.stringify(body);
      const req = request(
        { host: '127.0.0.1', port, path, method, ca, servername, headers: { 'content-type': 'application/json' } },
        (res) => {
          let text = '';
          res.on('data', (c: Buffer) => (text += c.toString()));
          res.on('end', () => {
            let parsed: unknown = text;
            try {
              parsed = JSON.parse(text);
            } catch {
              // not JSON
            }
            resolve({ status: res.statusCode ?? 0, body: parsed });
          });
        },
      );
      req.on('error', reject);
      req.end(method === 'GET' ? undefined : payload);
    });

  const deadline = Date.now() + 15_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`injector exited (${child.exitCode}):\n${output}`);
    const ok = await post('', '/healthz', 'GET').then(
      (r) => r.status === 200,
      () => false,
    );
    if (ok) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`injector not ready:\n${output}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    template: JSON.parse(templateJson),
    log: () => output,
    post: (body, path) => post(body, path),
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

let uid = 0;

/**
 * An AdmissionReview for creating this pod in `namespace`, as the API server sends it; with
 * `update`, for replacing `update.previous` with it (through `update.subResource`, for
 * `ephemeralcontainers`).
 */
export function podReview(
  pod: any,
  namespace: string,
  update?: { previous: any; subResource?: 'ephemeralcontainers' },
): object {
  uid += 1;
  const resource = { group: '', version: 'v1', resource: 'pods' };
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: `00000000-0000-4000-8000-${String(uid).padStart(12, '0')}`,
      kind: { group: '', version: 'v1', kind: 'Pod' },
      resource,
      ...(update?.subResource !== undefined ? { subResource: update.subResource } : {}),
      requestKind: { group: '', version: 'v1', kind: 'Pod' },
      requestResource: resource,
      namespace,
      operation: update === undefined ? 'CREATE' : 'UPDATE',
      userInfo: { username: 'system:serviceaccount:kube-system:replicaset-controller' },
      object: pod,
      oldObject: update?.previous ?? null,
      dryRun: false,
      options: { apiVersion: 'meta.k8s.io/v1', kind: update === undefined ? 'CreateOptions' : 'UpdateOptions' },
    },
  };
}

/** The pod a ReplicaSet creates from a Deployment's template. */
export function podOf(deployment: any): any {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      ...structuredClone(deployment.spec.template.metadata),
      generateName: `${deployment.metadata.name}-7d9f8b6c5-`,
      namespace: deployment.metadata.namespace,
    },
    spec: structuredClone(deployment.spec.template.spec),
  };
}
