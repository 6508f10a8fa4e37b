/* eslint-disable @typescript-eslint/no-unsafe-return -- manifests and pods are loose JSON, checked with expect() */
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { Ajv } from 'ajv';
import { parse as parseYaml } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseInjectionTemplate } from '../../control-plane/injector/injection-template.ts';
import { validateStrict } from './k8s-validate.ts';
import { documentedTable, valuesTable } from './values-table.ts';
import {
  buildRenderer,
  CHART_DIR,
  manifest,
  RENDERER_SETUP_MS,
  removeRenderer,
  renderChart,
  type RenderOptions,
} from './render.ts';
import { SIDECAR_ENV, SIDECAR_NODE_FLAGS } from '../../proxy/node-flags.ts';

const ROOT = new URL('../..', import.meta.url).pathname;
const MONITORING = ['monitoring.coreos.com/v1'];
const BUDGET = '3f1c9a52-8e0b-4c1e-9d7a-2b6f4e8a1c30';
const OTHER_BUDGET = '7d2e4b61-1a3c-4f5d-8e9f-0a1b2c3d4e5f';
const AGENTS = { agents: { tenant: 'acme', budget: BUDGET, apiKeySecret: 'acme-sidecar-key' } };

const VALUE_SETS: { name: string; values: object; options?: RenderOptions }[] = [
  { name: 'defaults', values: {} },
  {
    name: 'embedded NATS with governed namespaces and monitoring',
    values: {
      injection: {
        namespaces: {
          ...AGENTS,
          research: {
            tenant: 'globex',
            budget: OTHER_BUDGET,
            apiKeySecret: 'globex-key',
            allowedBudgets: [OTHER_BUDGET, BUDGET],
            providerKeys: { secretName: 'llm-keys', keys: { openai: 'openai-api-key', anthropic: 'anthropic' } },
          },
        },
      },
      networkPolicy: { enabled: true, metricsFrom: [{ namespaceSelector: { matchLabels: { name: 'monitoring' } } }] },
      controlPlane: {
        ingress: { enabled: true, className: 'nginx', host: 'governance.internal', tlsSecretName: 'gov-tls' },
      },
    },
    options: { apiVersions: MONITORING },
  },
  {
    name: 'external NATS with TLS',
    values: {
      nats: {
        url: 'tls://nats.messaging.svc:4222',
        embedded: { enabled: false },
        auth: { existingSecret: 'governance-nats' },
        tls: { enabled: true, caSecret: 'nats-ca' },
      },
      injection: { namespaces: { agents: { ...AGENTS.agents, natsSecret: 'acme-nats' } } },
    },
    options: { apiVersions: MONITORING },
  },
  {
    name: 'cert-manager',
    values: { certManager: { enabled: true }, injection: { namespaces: AGENTS } },
    options: { apiVersions: ['cert-manager.io/v1', ...MONITORING] },
  },
  {
    name: 'no Prometheus CRDs',
    values: { injection: { namespaces: AGENTS } },
  },
  {
    name: 'PostgreSQL with 3 replicas',
    values: {
      controlPlane: { replicas: 3, database: { existingSecret: 'governance-db', poolSize: 20 } },
      injection: { namespaces: AGENTS },
    },
    options: { apiVersions: MONITORING },
  },
  {
    name: 'plain sidecar container on Kubernetes 1.28',
    values: { sidecar: { native: false }, injection: { namespaces: AGENTS } },
    options: { kubeVersion: 'v1.28.9' },
  },
];

const chartValues = parseYaml(readFileSync(`${CHART_DIR}/values.yaml`, 'utf8')) as Record<string, unknown>;
const schema = JSON.parse(readFileSync(`${CHART_DIR}/values.schema.json`, 'utf8')) as object;
const ajv = new Ajv({ allErrors: true, strictTypes: false, allowUnionTypes: true });
const validateValues = ajv.compile(schema);

/** User values merged over values.yaml, as Helm validates them. */
function merged(values: object): unknown {
  const merge = (base: any, over: any): any => {
    if (typeof over !== 'object' || over === null || Array.isArray(over)) return over;
    const out = { ...(typeof base === 'object' && base !== null ? base : {}) };
    for (const [k, v] of Object.entries(over)) out[k] = merge(out[k], v);
    return out;
  };
  return merge(chartValues, values);
}

function container(workload: any, name: string): any {
  const found = workload.spec.template.spec.containers.find((c: any) => c.name === name);
  if (found === undefined) throw new Error(`no container ${name}`);
  return found;
}

function env(c: any, name: string): any {
  return c.env.find((e: any) => e.name === name);
}

beforeAll(buildRenderer, RENDERER_SETUP_MS);
afterAll(() => removeRenderer());

describe('the chart renders valid Kubernetes objects', () => {
  for (const set of VALUE_SETS) {
    it(`${set.name}: every manifest validates strictly and the values pass values.schema.json`, async () => {
      expect(validateValues(merged(set.values)), JSON.stringify(validateValues.errors)).toBe(true);
      const rendered = renderChart(set.values, set.options);
      expect(rendered.manifests.length).toBeGreaterThan(10);
      for (const m of rendered.manifests) await validateStrict(m.object);
      // The injector's own schema accepts what the chart gives it.
      const template = manifest(rendered, 'ConfigMap', 'ag-agent-governance-injector');
      expect(() => parseInjectionTemplate(JSON.parse(template.data['template.json']))).not.toThrow();
    });
  }

  it("starts every injected sidecar with the sidecar's V8 flags and environment (proxy/node-flags.ts)", () => {
    const template = JSON.parse(
      manifest(renderChart(), 'ConfigMap', 'ag-agent-governance-injector').data['template.json'],
    );
    expect(template.sidecar.args).toEqual([...SIDECAR_NODE_FLAGS, 'dist/proxy/main.js']);
    for (const [name, value] of Object.entries(SIDECAR_ENV))
      expect(template.sidecar.env).toContainEqual({ name, value });
  });

  it('refuses an unknown field, so the strict validation above means something', async () => {
    const rendered = renderChart();
    const sts = structuredClone(manifest(rendered, 'StatefulSet', 'ag-agent-governance-control-plane'));
    sts.spec.template.spec.containers[0].imagePullPolice = 'Always';
    await expect(validateStrict(sts)).rejects.toThrow(/unknown fields .*containers\/0\/imagePullPolice/);
    const svc = structuredClone(manifest(rendered, 'Service', 'ag-agent-governance-control-plane'));
    svc.spec.ports[0].port = 'http';
    await expect(validateStrict(svc)).rejects.toThrow(/ports\/0\/port/);
  });
});

describe('control plane', () => {
  it('runs one replica on LMDB in a StatefulSet with a volume, hardened, probed, listening on all addresses', () => {
    const rendered = renderChart();
    expect(
      rendered.manifests.some(
        (m) => m.object.kind === 'Deployment' && m.object.metadata.name.endsWith('control-plane'),
      ),
    ).toBe(false);
    const sts = manifest(rendered, 'StatefulSet', 'ag-agent-governance-control-plane');
    expect(sts.spec.replicas).toBe(1);
    expect(sts.spec.volumeClaimTemplates[0].spec.resources.requests.storage).toBe('10Gi');
    const cp = container(sts, 'control-plane');
    expect(cp.args).toEqual(['dist/control-plane/main.js']);
    expect(env(cp, 'SVC_HTTP_HOST').value).toBe('0.0.0.0');
    expect(env(cp, 'SVC_DATABASE_URL')).toBeUndefined();
    expect(env(cp, 'SVC_BOOTSTRAP_ADMIN_KEY').valueFrom.secretKeyRef).toEqual({
      name: 'ag-agent-governance-admin-key',
      key: 'admin-key',
    });
    expect(env(cp, 'SVC_NATS_URL').value).toBe(
      'tls://ag-agent-governance-nats.agent-governance.svc.cluster.local:4222',
    );
    expect(cp.livenessProbe.httpGet.path).toBe('/health/live');
    expect(cp.readinessProbe.httpGet.path).toBe('/health/ready');
    expect(cp.securityContext).toEqual({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      runAsNonRoot: true,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(sts.spec.template.spec.automountServiceAccountToken).toBe(false);
    expect(sts.spec.template.metadata.labels['agent-governance.io/inject']).toBe('disabled');
    const svc = manifest(rendered, 'Service', 'ag-agent-governance-control-plane');
    expect(svc.spec.ports.map((p: any) => [p.name, p.port])).toEqual([
      ['http', 8080],
      ['grpc', 50051],
    ]);
    manifest(rendered, 'PodDisruptionBudget', 'ag-agent-governance-control-plane');
    const key = manifest(rendered, 'Secret', 'ag-agent-governance-admin-key');
    expect(Buffer.from(key.data['admin-key'], 'base64').toString().length).toBeGreaterThanOrEqual(24);
    // The metrics token: the control plane reads it from the mounted Secret, Prometheus sends it.
    const token = manifest(rendered, 'Secret', 'ag-agent-governance-metrics-token');
    expect(Buffer.from(token.data.token, 'base64').toString()).toMatch(/^[A-Za-z0-9]{48}$/);
    expect(env(cp, 'SVC_METRICS_TOKEN_FILE').value).toBe('/etc/agent-governance/metrics/token');
    expect(cp.volumeMounts).toContainEqual({
      name: 'metrics-token',
      mountPath: '/etc/agent-governance/metrics',
      readOnly: true,
    });
    expect(sts.spec.template.spec.volumes).toContainEqual({
      name: 'metrics-token',
      secret: { secretName: 'ag-agent-governance-metrics-token', items: [{ key: 'token', path: 'token' }] },
    });
    // No component talks to the Kubernetes API: no Role, no binding.
    expect(rendered.manifests.filter((m) => /Role/.test(m.object.kind))).toEqual([]);
  });

  it('runs N replicas on PostgreSQL in a Deployment spread over nodes and zones', () => {
    const rendered = renderChart({ controlPlane: { replicas: 3, database: { url: 'postgres://gov:pw@db:5432/gov' } } });
    const deploy = manifest(rendered, 'Deployment', 'ag-agent-governance-control-plane');
    expect(deploy.spec.replicas).toBe(3);
    expect(deploy.spec.template.spec.topologySpreadConstraints.map((t: any) => t.topologyKey)).toEqual([
      'kubernetes.io/hostname',
      'topology.kubernetes.io/zone',
    ]);
    const cp = container(deploy, 'control-plane');
    expect(env(cp, 'SVC_DATABASE_URL').valueFrom.secretKeyRef).toEqual({
      name: 'ag-agent-governance-database',
      key: 'url',
    });
    expect(env(cp, 'SVC_DATABASE_POOL_SIZE').value).toBe('10');
    // A replica drains within its grace, and Kubernetes waits longer than that before killing it.
    expect(env(cp, 'SVC_SHUTDOWN_GRACE_MS').value).toBe('25000');
    expect(deploy.spec.template.spec.terminationGracePeriodSeconds).toBe(40);
    const secret = manifest(rendered, 'Secret', 'ag-agent-governance-database');
    expect(Buffer.from(secret.data.url, 'base64').toString()).toBe('postgres://gov:pw@db:5432/gov');
    expect(
      rendered.manifests.some(
        (m) => m.object.kind === 'StatefulSet' && m.object.metadata.name.endsWith('control-plane'),
      ),
    ).toBe(false);
  });

  it('refuses more than one replica without a database, in the template and in the schema', () => {
    const values = { controlPlane: { replicas: 2 } };
    expect(() => renderChart(values)).toThrow(/controlPlane.replicas > 1 needs PostgreSQL/);
    expect(validateValues(merged(values))).toBe(false);
    expect(validateValues.errors?.map((e) => e.instancePath)).toContain('/controlPlane/database');
    // An empty URL is no database either.
    const empty = { controlPlane: { replicas: 3, database: { url: '' } } };
    expect(() => renderChart(empty)).toThrow(/controlPlane.replicas > 1 needs PostgreSQL/);
    expect(validateValues(merged(empty))).toBe(false);
    expect(validateValues.errors?.map((e) => e.instancePath)).toContain('/controlPlane/database/url');
    const secret = { controlPlane: { replicas: 3, database: { existingSecret: 'governance-db' } } };
    expect(validateValues(merged(secret))).toBe(true);
  });
});

describe('NATS', () => {
  it('embeds a single JetStream node whose accounts are the tenant isolation of docs/nats.md', () => {
    const rendered = renderChart({ injection: { namespaces: AGENTS } });
    const sts = manifest(rendered, 'StatefulSet', 'ag-agent-governance-nats');
    expect(container(sts, 'nats').image).toBe('nats:2.10-alpine');
    const config = manifest(rendered, 'Secret', 'ag-agent-governance-nats-config');
    const conf = Buffer.from(config.data['nats.conf'], 'base64').toString();
    // The permissions of proxy-acme are those of config/nats/tenant-isolation.conf, string for string.
    const reference = readFileSync(`${ROOT}/config/nats/tenant-isolation.conf`, 'utf8');
    const block = (text: string) => {
      const start = text.indexOf('user: proxy-acme');
      const end = text.indexOf('_INBOX_acme.>', start);
      return [...text.slice(start, end + 20).matchAll(/"([^"]+)"/g)]
        .map((m) => m[1]!)
        .filter((s) => !s.includes('secret') && !/^[A-Za-z0-9]{40}$/.test(s));
    };
    expect(block(conf)).toHaveLength(24);
    // The replicas' failed-authentication and request counts: neither published nor read by a proxy.
    expect(block(conf).filter((s) => s === 'svc.system.auth-failures')).toHaveLength(2);
    expect(block(conf).filter((s) => s === 'svc.system.request-counts')).toHaveLength(2);
    // The envelope holds: read and watched by a proxy on its own tenant's keys only.
    expect(block(conf)).toEqual(
      expect.arrayContaining([
        '$JS.API.DIRECT.GET.KV_svc_holds.$KV.svc_holds.hold.acme.>',
        '$JS.API.CONSUMER.CREATE.KV_svc_holds.*.$KV.svc_holds.hold.acme.>',
      ]),
    );
    expect(block(conf)).toEqual(block(reference));
    // The sidecars' credentials in the governed namespace match the server's user.
    const client = manifest(rendered, 'Secret', 'ag-agent-governance-nats-client', 'agents');
    const password = Buffer.from(client.data.password, 'base64').toString();
    expect(Buffer.from(client.data.user, 'base64').toString()).toBe('proxy-acme');
    expect(conf).toContain(`user: proxy-acme\n        password: "${password}"`);
    expect(Buffer.from(config.data['password.proxy-acme'], 'base64').toString()).toBe(password);
  });

  it("writes every Secret a sidecar mounts into a namespace listed as {}, its NATS user the defaults' tenant's", () => {
    const defaults = { tenant: 'acme', budget: BUDGET, apiKeySecret: 'acme-sidecar-key' };
    const rendered = renderChart({ injection: { defaults, namespaces: { research: {} } } });
    const client = manifest(rendered, 'Secret', 'ag-agent-governance-nats-client', 'research');
    const password = Buffer.from(client.data.password, 'base64').toString();
    expect(Buffer.from(client.data.user, 'base64').toString()).toBe('proxy-acme');
    const conf = Buffer.from(
      manifest(rendered, 'Secret', 'ag-agent-governance-nats-config').data['nats.conf'],
      'base64',
    );
    expect(conf.toString()).toContain(`user: proxy-acme\n        password: "${password}"`);
    const template = JSON.parse(manifest(rendered, 'ConfigMap', 'ag-agent-governance-injector').data['template.json']);
    expect(template.namespaces.research.natsSecret).toBe('ag-agent-governance-nats-client');
    for (const name of [
      'ag-agent-governance-proxy-ca',
      'ag-agent-governance-nats-ca',
      'ag-agent-governance-sidecar-metrics-token',
    ])
      expect(manifest(rendered, 'Secret', name, 'research').metadata.namespace).toBe('research');
    // Credentials the user named for every namespace are theirs: the chart writes none.
    const named = renderChart({
      injection: { defaults: { ...defaults, natsSecret: 'acme-nats' }, namespaces: { research: {} } },
    });
    expect(named.manifests.some((m) => m.object.metadata.name === 'ag-agent-governance-nats-client')).toBe(false);
    const namedTemplate = JSON.parse(
      manifest(named, 'ConfigMap', 'ag-agent-governance-injector').data['template.json'],
    );
    expect(namedTemplate.namespaces.research.natsSecret).toBeUndefined();
  });

  it('speaks TLS to the embedded server, with a CA and a server certificate it generates, the CA in every governed namespace', () => {
    const rendered = renderChart({ injection: { namespaces: AGENTS } });
    const host = 'ag-agent-governance-nats.agent-governance.svc.cluster.local';
    const decoded = (secret: any, key: string) => Buffer.from(secret.data[key], 'base64').toString();
    const server = manifest(rendered, 'Secret', 'ag-agent-governance-nats-server');
    const ca = new X509Certificate(decoded(server, 'ca.crt'));
    const certificate = new X509Certificate(decoded(server, 'tls.crt'));
    expect(ca.ca).toBe(true);
    expect(certificate.verify(ca.publicKey)).toBe(true);
    expect(certificate.checkHost(host)).toBe(host);
    expect(certificate.checkHost('evil.example')).toBeUndefined();
    expect(certificate.checkPrivateKey(createPrivateKey(decoded(server, 'tls.key')))).toBe(true);
    // The server presents it; the control plane and the sidecars trust the CA alone.
    const conf = decoded(manifest(rendered, 'Secret', 'ag-agent-governance-nats-config'), 'nats.conf');
    expect(conf).toContain('cert_file: /etc/nats/tls/tls.crt');
    const sts = manifest(rendered, 'StatefulSet', 'ag-agent-governance-nats');
    expect(sts.spec.template.spec.volumes).toContainEqual({
      name: 'tls',
      secret: { secretName: 'ag-agent-governance-nats-server' },
    });
    for (const ns of ['agent-governance', 'agents']) {
      const copy = manifest(rendered, 'Secret', 'ag-agent-governance-nats-ca', ns);
      expect(Object.keys(copy.data)).toEqual(['ca.crt']);
      expect(decoded(copy, 'ca.crt')).toBe(decoded(server, 'ca.crt'));
    }
    const cp = container(manifest(rendered, 'StatefulSet', 'ag-agent-governance-control-plane'), 'control-plane');
    expect(env(cp, 'SVC_NATS_URL').value).toBe(`tls://${host}:4222`);
    expect(env(cp, 'SVC_NATS_TLS_CA_FILE').value).toBe('/etc/agent-governance/nats-tls/ca.crt');
    const template = JSON.parse(manifest(rendered, 'ConfigMap', 'ag-agent-governance-injector').data['template.json']);
    expect(template.natsTlsSecretName).toBe('ag-agent-governance-nats-ca');
    // Plaintext only when asked for.
    const plain = renderChart({ injection: { namespaces: AGENTS }, nats: { embedded: { tls: false } } });
    expect(
      env(
        container(manifest(plain, 'StatefulSet', 'ag-agent-governance-control-plane'), 'control-plane'),
        'SVC_NATS_URL',
      ).value,
    ).toBe(`nats://${host}:4222`);
    expect(plain.manifests.some((m) => m.object.metadata.name === 'ag-agent-governance-nats-server')).toBe(false);
  });

  it('uses an existing cluster with TLS, its CA mounted, no embedded server', () => {
    const rendered = renderChart(VALUE_SETS[2]!.values, VALUE_SETS[2]!.options);
    expect(rendered.manifests.some((m) => m.object.metadata.name === 'ag-agent-governance-nats')).toBe(false);
    const cp = container(manifest(rendered, 'StatefulSet', 'ag-agent-governance-control-plane'), 'control-plane');
    expect(env(cp, 'SVC_NATS_URL').value).toBe('tls://nats.messaging.svc:4222');
    expect(env(cp, 'SVC_NATS_TLS_CA_FILE').value).toBe('/etc/agent-governance/nats-tls/ca.crt');
    expect(env(cp, 'SVC_NATS_USER').valueFrom.secretKeyRef.name).toBe('governance-nats');
    const template = JSON.parse(manifest(rendered, 'ConfigMap', 'ag-agent-governance-injector').data['template.json']);
    expect(template.natsTlsSecretName).toBe('nats-ca');
    expect(template.noProxy).toContain('nats.messaging.svc');
    expect(template.namespaces.agents.natsSecret).toBe('acme-nats');
  });

  it('refuses neither or both of nats.url and the embedded server', () => {
    expect(() => renderChart({ nats: { embedded: { enabled: false } } })).toThrow(/NATS is required/);
    expect(validateValues(merged({ nats: { embedded: { enabled: false } } }))).toBe(false);
    expect(() => renderChart({ nats: { url: 'nats://n:4222' } })).toThrow(/exclusive/);
  });
});

describe('proxy CA and the webhook', () => {
  it('generates one CA per governed namespace and a serving certificate the caBundle verifies', () => {
    const rendered = renderChart({
      injection: { namespaces: { ...AGENTS, other: { tenant: 'acme', budget: BUDGET, apiKeySecret: 'k' } } },
    });
    const a = manifest(rendered, 'Secret', 'ag-agent-governance-proxy-ca', 'agents');
    const b = manifest(rendered, 'Secret', 'ag-agent-governance-proxy-ca', 'other');
    expect(a.type).toBe('kubernetes.io/tls');
    const ca = new X509Certificate(Buffer.from(a.data['tls.crt'], 'base64'));
    expect(ca.ca).toBe(true);
    expect(a.data['tls.crt']).not.toBe(b.data['tls.crt']);
    const hook = manifest(rendered, 'MutatingWebhookConfiguration', 'ag-agent-governance-injector');
    const webhook = hook.webhooks[0];
    expect(webhook.failurePolicy).toBe('Fail');
    expect(webhook.sideEffects).toBe('None');
    expect(webhook.namespaceSelector.matchLabels).toEqual({ 'agent-governance.io/inject': 'enabled' });
    expect(webhook.namespaceSelector.matchExpressions[0].values).toEqual([
      'kube-system',
      'kube-public',
      'kube-node-lease',
      'agent-governance',
      'agents',
      'other',
    ]);
    // The bound namespaces, labelled or not: the chart put the sidecar's Secrets there. The two
    // selectors never meet, so no pod is reviewed twice.
    expect(hook.webhooks.map((w: any) => w.name)).toEqual(['inject.agent-governance.io', 'bound.agent-governance.io']);
    expect(hook.webhooks[1].namespaceSelector).toEqual({
      matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'In', values: ['agents', 'other'] }],
    });
    expect(hook.webhooks[1].rules).toEqual(webhook.rules);
    expect(hook.webhooks[1].clientConfig).toEqual(webhook.clientConfig);
    // Without bound namespaces, the labelled ones alone.
    const unbound = manifest(renderChart(), 'MutatingWebhookConfiguration', 'ag-agent-governance-injector');
    expect(unbound.webhooks.map((w: any) => w.name)).toEqual(['inject.agent-governance.io']);
    // Every pod of a governed namespace reaches the webhook, a pod labelled out included: it
    // checks that no container but the sidecar reads the sidecar's Secrets.
    expect(webhook.objectSelector).toBeUndefined();
    expect(webhook.rules).toEqual([
      {
        operations: ['CREATE', 'UPDATE'],
        apiGroups: [''],
        apiVersions: ['v1'],
        resources: ['pods', 'pods/ephemeralcontainers'],
        scope: 'Namespaced',
      },
    ]);
    const tls = manifest(rendered, 'Secret', 'ag-agent-governance-injector-tls');
    const root = new X509Certificate(Buffer.from(webhook.clientConfig.caBundle, 'base64'));
    const serving = new X509Certificate(Buffer.from(tls.data['tls.crt'], 'base64'));
    expect(serving.verify(root.publicKey)).toBe(true);
    expect(serving.checkHost('ag-agent-governance-injector.agent-governance.svc')).toBeDefined();
    expect(webhook.clientConfig.service).toMatchObject({ name: 'ag-agent-governance-injector', path: '/mutate' });
  });

  it('leaves the CA to cert-manager when enabled, and refuses cert-manager that is not installed', () => {
    const rendered = renderChart(VALUE_SETS[3]!.values, VALUE_SETS[3]!.options);
    const cert = manifest(rendered, 'Certificate', 'ag-agent-governance-proxy-ca', 'agents');
    expect(cert.spec).toMatchObject({ isCA: true, secretName: 'ag-agent-governance-proxy-ca' });
    manifest(rendered, 'Issuer', 'ag-agent-governance-proxy-ca-selfsigned', 'agents');
    expect(
      rendered.manifests.some((m) => m.object.kind === 'Secret' && m.object.metadata.name.endsWith('proxy-ca')),
    ).toBe(false);
    const hook = manifest(rendered, 'MutatingWebhookConfiguration', 'ag-agent-governance-injector');
    expect(hook.metadata.annotations['cert-manager.io/inject-ca-from']).toBe(
      'agent-governance/ag-agent-governance-injector',
    );
    expect(() => renderChart({ certManager: { enabled: true } })).toThrow(/cert-manager \(API cert-manager.io\/v1\)/);
  });

  it('takes the CA from an existing Secret and renders none', () => {
    const rendered = renderChart({ ca: { existingSecret: 'corp-proxy-ca' }, injection: { namespaces: AGENTS } });
    expect(rendered.manifests.some((m) => m.object.metadata.name.includes('proxy-ca'))).toBe(false);
    const template = JSON.parse(manifest(rendered, 'ConfigMap', 'ag-agent-governance-injector').data['template.json']);
    expect(template.caSecretName).toBe('corp-proxy-ca');
  });

  it('refuses the native sidecar before Kubernetes 1.29 and a governed system namespace', () => {
    expect(() => renderChart({}, { kubeVersion: 'v1.28.3' })).toThrow(/sidecar.native needs Kubernetes 1.29/);
    expect(() => renderChart({ injection: { namespaces: { 'kube-system': AGENTS.agents } } })).toThrow(
      /injection.namespaces.kube-system/,
    );
  });
});

describe('observability', () => {
  const metricNames = (() => {
    const names = new Set<string>();
    const walk = (dir: string) => {
      for (const entry of readdirSync(dir, { withFileTypes: true })) {
        if (entry.isDirectory()) walk(`${dir}/${entry.name}`);
        else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts')) {
          const source = readFileSync(`${dir}/${entry.name}`, 'utf8');
          for (const m of source.matchAll(/name: '(svc_[a-z_]+)'/g)) names.add(m[1]!);
          // The outbox names its three metrics after the prefix each process gives it.
          for (const m of source.matchAll(/metricPrefix: '(svc_[a-z_]+)'/g))
            for (const suffix of ['_depth', '_published_total', '_dropped_total']) names.add(m[1]! + suffix);
        }
      }
    };
    for (const dir of ['core', 'proxy', 'control-plane']) walk(`${ROOT}/${dir}`);
    return names;
  })();

  it('gives the sidecars of each governed namespace their own metrics token, which the PodMonitor bears', () => {
    const rendered = renderChart({ injection: { namespaces: AGENTS } });
    const release = manifest(rendered, 'Secret', 'ag-agent-governance-sidecar-metrics-token', 'agent-governance');
    const governed = manifest(rendered, 'Secret', 'ag-agent-governance-sidecar-metrics-token', 'agents');
    expect(governed.data.token).toBe(release.data.token);
    // Not the control plane's: reading a governed namespace's Secrets opens no tenant's budget series.
    const controlPlane = manifest(rendered, 'Secret', 'ag-agent-governance-metrics-token', 'agent-governance');
    expect(governed.data.token).not.toBe(controlPlane.data.token);
    expect(
      rendered.manifests.filter((m) => m.object.metadata?.name === 'ag-agent-governance-metrics-token'),
    ).toHaveLength(1);
    const template = JSON.parse(manifest(rendered, 'ConfigMap', 'ag-agent-governance-injector').data['template.json']);
    expect(template.metricsTokenSecretName).toBe('ag-agent-governance-sidecar-metrics-token');
  });

  it('creates monitors and rules only where the Prometheus operator CRDs exist', () => {
    const without = renderChart({ injection: { namespaces: AGENTS } });
    expect(without.manifests.filter((m) => m.object.apiVersion === 'monitoring.coreos.com/v1')).toEqual([]);
    const withCrds = renderChart({ injection: { namespaces: AGENTS } }, { apiVersions: MONITORING });
    const monitor = manifest(withCrds, 'PodMonitor', 'ag-agent-governance-sidecars');
    expect(monitor.spec.selector.matchLabels).toEqual({ 'agent-governance.io/sidecar': 'injected' });
    expect(monitor.spec.podMetricsEndpoints[0].port).toBe('svc-admin');
    expect(monitor.spec.podMetricsEndpoints[0].authorization).toEqual({
      type: 'Bearer',
      credentials: { name: 'ag-agent-governance-sidecar-metrics-token', key: 'token' },
    });
    const scrape = manifest(withCrds, 'ServiceMonitor', 'ag-agent-governance-control-plane').spec.endpoints[0];
    expect(scrape.authorization).toEqual({
      type: 'Bearer',
      credentials: { name: 'ag-agent-governance-metrics-token', key: 'token' },
    });
    const dashboard = manifest(withCrds, 'ConfigMap', 'ag-agent-governance-dashboard');
    expect(dashboard.metadata.labels.grafana_dashboard).toBe('1');
  });

  it("sends the sidecars' metrics token to the governed namespaces' pods only", () => {
    const scraped = (values: object) =>
      renderChart(values, { apiVersions: MONITORING }).manifests.find((m) => m.object.kind === 'PodMonitor')?.object;
    // A pod labelled like a sidecar in any other namespace would receive the token: no `any`.
    expect(scraped({ injection: { namespaces: AGENTS } })?.spec.namespaceSelector).toEqual({ matchNames: ['agents'] });
    const both = renderChart({ injection: { namespaces: { ...AGENTS, research: {} } } }, { apiVersions: MONITORING });
    expect(manifest(both, 'PodMonitor', 'ag-agent-governance-sidecars').spec.namespaceSelector).toEqual({
      matchNames: ['agents', 'research'],
    });
    // Nothing governed, nothing scraped.
    expect(scraped({})).toBeUndefined();
  });

  it('lets the governed namespaces, labelled or listed, reach the control plane, and their sidecars NATS', () => {
    const rendered = renderChart(VALUE_SETS[1]!.values, VALUE_SETS[1]!.options);
    const labelled = { namespaceSelector: { matchLabels: { 'agent-governance.io/inject': 'enabled' } } };
    const listed = {
      namespaceSelector: {
        matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'In', values: ['agents', 'research'] }],
      },
    };
    const sidecars = { podSelector: { matchLabels: { 'agent-governance.io/sidecar': 'injected' } } };
    const from = (name: string) => manifest(rendered, 'NetworkPolicy', name).spec.ingress[0].from;
    expect(from('ag-agent-governance-control-plane')).toEqual([{ podSelector: {} }, labelled, listed]);
    expect(from('ag-agent-governance-nats')).toEqual([
      { podSelector: { matchLabels: expect.objectContaining({ 'app.kubernetes.io/component': 'control-plane' }) } },
      { ...labelled, ...sidecars },
      { ...listed, ...sidecars },
    ]);
    // Nothing listed: the labelled namespaces alone.
    const bare = renderChart({ networkPolicy: { enabled: true } });
    expect(manifest(bare, 'NetworkPolicy', 'ag-agent-governance-nats').spec.ingress[0].from.slice(1)).toEqual([
      { ...labelled, ...sidecars },
    ]);
  });

  it('alerts and charts only metrics the code exports', () => {
    const rendered = renderChart({}, { apiVersions: MONITORING });
    const rules = manifest(rendered, 'PrometheusRule', 'ag-agent-governance').spec.groups[0].rules;
    expect(rules.map((r: any) => r.alert)).toEqual(
      expect.arrayContaining([
        'AgentGovernanceBudgetNearlySpent',
        'AgentGovernanceProxyOutboxGrowing',
        'AgentGovernanceNatsDisconnected',
        'AgentGovernanceCutoffsSpiking',
        'AgentGovernancePolicyDenialsSpiking',
        'AgentGovernanceSidecarHeldByImmuneSystem',
        'AgentGovernanceForeignEnvelopeClaims',
      ]),
    );
    const dashboard = manifest(rendered, 'ConfigMap', 'ag-agent-governance-dashboard').data['agent-governance.json'];
    const alertExprs: string[] = rules.map((r: any) => String(r.expr));
    const panelExprs: string[] = JSON.parse(dashboard).panels.flatMap((p: any) =>
      p.targets.map((t: any) => String(t.expr)),
    );
    const metricsOf = (exprs: string[]): Set<string> =>
      new Set(exprs.flatMap((e) => [...e.matchAll(/\b(svc_[a-z_]+)/g)].map((m) => m[1]!.replace(/_bucket$/, ''))));
    const used = metricsOf([...alertExprs, ...panelExprs]);
    expect(used.size).toBeGreaterThan(10);
    expect([...used].filter((name) => !metricNames.has(name))).toEqual([]);
    // An operator paged by an alert finds what it read on the dashboard.
    const charted = metricsOf(panelExprs);
    expect([...metricsOf(alertExprs)].filter((name) => !charted.has(name))).toEqual([]);
    expect(rules.find((r: any) => r.alert === 'AgentGovernanceBudgetNearlySpent').expr).toContain('>= 0.8');
  });
});

describe('values.schema.json', () => {
  const bad: [string, object, string][] = [
    ['a negative replica count', { controlPlane: { replicas: 0 } }, '/controlPlane/replicas'],
    ['an unknown key', { controlPlane: { replica: 2 } }, '/controlPlane'],
    ['a failure policy Kubernetes does not know', { injector: { failurePolicy: 'Retry' } }, '/injector/failurePolicy'],
    [
      'a budget that is not a UUID',
      { injection: { namespaces: { agents: { budget: 'monthly' } } } },
      '/injection/namespaces/agents/budget',
    ],
    [
      'a tenant with a dot',
      { injection: { namespaces: { agents: { tenant: 'a.b' } } } },
      '/injection/namespaces/agents/tenant',
    ],
    ['a namespace name in upper case', { injection: { namespaces: { Agents: {} } } }, '/injection/namespaces'],
    ['a port out of range', { sidecar: { adminPort: 70000 } }, '/sidecar/adminPort'],
    ['a sidecar setting that is not SVC_*', { sidecar: { env: { HTTPS_PROXY: 'x' } } }, '/sidecar/env'],
    [
      'a budget ratio above 1',
      { metrics: { prometheusRule: { budgetWarningRatio: 80 } } },
      '/metrics/prometheusRule/budgetWarningRatio',
    ],
    ['a string for a boolean', { sidecar: { native: 'yes' } }, '/sidecar/native'],
  ];
  for (const [what, values, path] of bad) {
    it(`rejects ${what}, naming ${path}`, () => {
      expect(validateValues(merged(values))).toBe(false);
      expect(validateValues.errors?.map((e) => e.instancePath)).toContain(path);
    });
  }

  it('accepts values.yaml as it is', () => {
    expect(validateValues(chartValues), JSON.stringify(validateValues.errors)).toBe(true);
  });
});

describe('docs/kubernetes.md', () => {
  /** Cells of a markdown table, so that Prettier's column alignment does not matter. */
  const cells = (table: string | undefined) =>
    (table ?? '').split('\n').map((row) =>
      row
        .split(/(?<!\\)\|/)
        .map((c) => c.trim().replace(/^-{3,}$/, '---'))
        .filter((c, i, all) => i > 0 && i < all.length - 1),
    );

  it('holds the values table generated from values.schema.json (node test/helm/values-table.ts)', () => {
    const table = valuesTable();
    expect(table.split('\n').length).toBeGreaterThan(100);
    expect(cells(documentedTable())).toEqual(cells(table));
  });
});
