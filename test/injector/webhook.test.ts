/* eslint-disable @typescript-eslint/no-unsafe-return -- manifests and pods are loose JSON, checked with expect() */
import jsonpatch from 'fast-json-patch';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { injectionPatch } from '../../control-plane/injector/sidecar-patch.ts';
import { parseInjectionTemplate } from '../../control-plane/injector/injection-template.ts';
import { validateStrict } from '../helm/k8s-validate.ts';
import { buildRenderer, manifest, RENDERER_SETUP_MS, removeRenderer, renderChart } from '../helm/render.ts';
import { podOf, podReview, startInjector, type InjectorProcess } from './injector-process.ts';

const BUDGET = '3f1c9a52-8e0b-4c1e-9d7a-2b6f4e8a1c30';
const OTHER = '7d2e4b61-1a3c-4f5d-8e9f-0a1b2c3d4e5f';
const APP_ENV = [
  'HTTPS_PROXY',
  'HTTP_PROXY',
  'NO_PROXY',
  'https_proxy',
  'http_proxy',
  'no_proxy',
  'NODE_USE_ENV_PROXY',
  'NODE_EXTRA_CA_CERTS',
  'SSL_CERT_FILE',
  'REQUESTS_CA_BUNDLE',
];
const VALUES = {
  injection: {
    namespaces: {
      agents: {
        tenant: 'acme',
        budget: BUDGET,
        apiKeySecret: 'acme-sidecar-key',
        allowedBudgets: [BUDGET, OTHER],
        providerKeys: { secretName: 'llm-keys', keys: { openai: 'openai-api-key' } },
      },
      secured: { tenant: 'acme', budget: BUDGET, apiKeySecret: 'acme-sidecar-key', enforce: true },
    },
  },
};

function deployment(name: string, namespace: string, template: { metadata?: any; spec: any }): any {
  const labels = { app: name };
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, namespace },
    spec: {
      replicas: 1,
      selector: { matchLabels: labels },
      template: {
        metadata: { ...template.metadata, labels: { ...labels, ...template.metadata?.labels } },
        spec: template.spec,
      },
    },
  };
}

const nodeAgent = deployment('research-agent', 'agents', {
  spec: {
    containers: [
      {
        name: 'agent',
        image: 'node:24-slim',
        command: ['node', 'agent.js'],
        env: [{ name: 'OPENAI_MODEL', value: 'gpt-4o-mini' }],
      },
    ],
  },
});
const pythonAgent = deployment('triage-agent', 'agents', {
  metadata: { annotations: { 'agent-governance.io/budget': OTHER } },
  spec: {
    initContainers: [{ name: 'fetch-prompts', image: 'busybox:1.36', command: ['sh', '-c', 'true'] }],
    containers: [
      {
        name: 'agent',
        image: 'python:3.12-slim',
        command: ['python', '-m', 'triage'],
        env: [
          { name: 'HTTPS_PROXY', value: 'http://old-proxy:8080' },
          { name: 'LOG_LEVEL', value: 'debug' },
        ],
        volumeMounts: [{ name: 'prompts', mountPath: '/prompts' }],
      },
      { name: 'exporter', image: 'python:3.12-slim', command: ['python', '-m', 'export'] },
    ],
    volumes: [{ name: 'prompts', emptyDir: {} }],
  },
});
const withSidecar = deployment('already', 'agents', {
  spec: {
    containers: [
      { name: 'agent', image: 'node:24-slim' },
      { name: 'agent-governance-proxy', image: 'agent-governance:1.0.0' },
    ],
  },
});
const optedOut = deployment('batch', 'agents', {
  metadata: { annotations: { 'agent-governance.io/inject': 'false' } },
  spec: { containers: [{ name: 'job', image: 'node:24-slim' }] },
});
const hostNetwork = deployment('node-agent', 'agents', {
  spec: { hostNetwork: true, containers: [{ name: 'agent', image: 'node:24-slim' }] },
});
const labelledOut = deployment('exporter', 'agents', {
  metadata: { labels: { 'agent-governance.io/inject': 'disabled' } },
  spec: { containers: [{ name: 'exporter', image: 'python:3.12-slim' }] },
});
const system = deployment('dns-helper', 'kube-system', {
  spec: { containers: [{ name: 'c', image: 'busybox:1.36' }] },
});

let injector: InjectorProcess;

beforeAll(buildRenderer, RENDERER_SETUP_MS);
beforeAll(async () => {
  injector = await startInjector(renderChart(VALUES));
}, 60_000);
afterAll(async () => {
  await injector?.stop();
  removeRenderer();
});

async function review(pod: any, namespace: string): Promise<any> {
  const res = await injector.post(podReview(pod, namespace));
  expect(res.status).toBe(200);
  expect(res.body.apiVersion).toBe('admission.k8s.io/v1');
  return res.body.response;
}

function patched(pod: any, response: any): any {
  expect(response.allowed).toBe(true);
  expect(response.patchType).toBe('JSONPatch');
  const ops = JSON.parse(Buffer.from(response.patch, 'base64').toString());
  // validateOperation: true refuses an operation on a path that does not exist.
  return jsonpatch.applyPatch(structuredClone(pod), ops, true, false).newDocument;
}

function checkGoverned(pod: any): void {
  const sidecar = pod.spec.initContainers.find((c: any) => c.name === 'agent-governance-proxy');
  expect(sidecar.restartPolicy).toBe('Always');
  expect(pod.spec.initContainers[0].name).toBe('agent-governance-proxy');
  expect(sidecar.startupProbe.httpGet).toEqual({ path: '/health/ready', port: 'svc-admin' });
  expect(sidecar.ports).toEqual([{ name: 'svc-admin', containerPort: 9464, protocol: 'TCP' }]);
  const sidecarEnv = Object.fromEntries(sidecar.env.map((e: any) => [e.name, e.value ?? e.valueFrom]));
  expect(sidecarEnv.SVC_PROXY_HOST).toBe('127.0.0.1');
  expect(sidecarEnv.SVC_PROXY_ADMIN_HOST).toBe('0.0.0.0');
  expect(sidecarEnv.SVC_API_KEY).toEqual({ secretKeyRef: { name: 'acme-sidecar-key', key: 'api-key' } });
  expect(sidecarEnv.SVC_PROVIDER_KEY_FILE_OPENAI).toBe('/etc/agent-governance/provider-keys/openai');
  expect(sidecarEnv.SVC_ALLOWED_BUDGET_IDS).toBe(`${BUDGET},${OTHER}`);
  // Its /metrics only for the scrape bearing the sidecars' metrics token (the PodMonitor's).
  expect(sidecarEnv.SVC_METRICS_TOKEN_FILE).toBe('/etc/agent-governance/metrics/token');
  expect(sidecar.volumeMounts).toContainEqual({
    name: 'agent-governance-metrics-token',
    mountPath: '/etc/agent-governance/metrics',
    readOnly: true,
  });
  expect(pod.spec.volumes).toContainEqual({
    name: 'agent-governance-metrics-token',
    secret: {
      secretName: 'ag-agent-governance-sidecar-metrics-token',
      defaultMode: 0o444,
      items: [{ key: 'token', path: 'token' }],
    },
  });
  for (const c of pod.spec.containers) {
    const env = Object.fromEntries(c.env.map((e: any) => [e.name, e.value]));
    for (const name of APP_ENV) expect(env[name], `${c.name} ${name}`).toBeDefined();
    expect(env.HTTPS_PROXY).toBe('http://127.0.0.1:3128');
    expect(env.NODE_USE_ENV_PROXY).toBe('1');
    expect(env.SSL_CERT_FILE).toBe('/var/run/agent-governance/trust/ca-bundle.pem');
    expect(env.NODE_EXTRA_CA_CERTS).toBe(env.SSL_CERT_FILE);
    expect(env.REQUESTS_CA_BUNDLE).toBe(env.SSL_CERT_FILE);
    expect(env.NO_PROXY.split(',')).toEqual(
      expect.arrayContaining([
        'localhost',
        '127.0.0.1',
        '.svc',
        '.cluster.local',
        'ag-agent-governance-control-plane.agent-governance.svc.cluster.local',
        'ag-agent-governance-nats.agent-governance.svc.cluster.local',
      ]),
    );
    expect(c.env.filter((e: any) => e.name === 'HTTPS_PROXY')).toHaveLength(1);
    expect(c.volumeMounts).toContainEqual({
      name: 'agent-governance-trust',
      mountPath: '/var/run/agent-governance/trust',
      readOnly: true,
    });
    // Secrets reach the sidecar only: no CA key, provider key or API key in an app container.
    expect(c.volumeMounts.map((m: any) => m.name)).not.toContain('agent-governance-ca');
    expect(c.volumeMounts.map((m: any) => m.name)).not.toContain('agent-governance-provider-keys');
    expect(JSON.stringify(c.env)).not.toContain('secretKeyRef');
  }
  expect(pod.metadata.annotations['agent-governance.io/status']).toBe('injected');
  expect(pod.metadata.labels['agent-governance.io/sidecar']).toBe('injected');
}

describe('the injection webhook over HTTPS', () => {
  it('injects a Node agent: a valid pod with the native sidecar, the proxy variables and the trust bundle', async () => {
    await validateStrict(nodeAgent);
    const pod = podOf(nodeAgent);
    const response = await review(pod, 'agents');
    const injected = patched(pod, response);
    await validateStrict(injected);
    checkGoverned(injected);
    expect(injected.spec.containers[0].env[0]).toEqual({ name: 'OPENAI_MODEL', value: 'gpt-4o-mini' });
    expect(injected.metadata.annotations['agent-governance.io/tenant']).toBe('acme');
    expect(injected.metadata.annotations['agent-governance.io/budget']).toBe(BUDGET);
  });

  it('injects a Python agent, replacing its own proxy setting and keeping its mounts and init container', async () => {
    await validateStrict(pythonAgent);
    const pod = podOf(pythonAgent);
    const injected = patched(pod, await review(pod, 'agents'));
    await validateStrict(injected);
    checkGoverned(injected);
    expect(injected.spec.initContainers.map((c: any) => c.name)).toEqual(['agent-governance-proxy', 'fetch-prompts']);
    expect(injected.spec.containers).toHaveLength(2);
    const agent = injected.spec.containers[0];
    expect(agent.volumeMounts[0]).toEqual({ name: 'prompts', mountPath: '/prompts' });
    expect(agent.env.find((e: any) => e.name === 'LOG_LEVEL').value).toBe('debug');
    // The pod's annotation picks another allowed budget.
    const sidecar = injected.spec.initContainers[0];
    expect(sidecar.env.find((e: any) => e.name === 'SVC_BUDGET_ID').value).toBe(OTHER);
  });

  for (const [what, source, namespace] of [
    ['an opted-out pod', optedOut, 'agents'],
    ['a pod labelled out', labelledOut, 'agents'],
    ['a hostNetwork pod', hostNetwork, 'agents'],
    ['a pod in kube-system', system, 'kube-system'],
    [
      'a pod in the release namespace',
      deployment('x', 'agent-governance', nodeAgent.spec.template),
      'agent-governance',
    ],
  ] as const) {
    it(`leaves ${what} alone`, async () => {
      await validateStrict(source);
      const response = await review(podOf(source), namespace);
      expect(response).toEqual({ uid: expect.any(String), allowed: true });
    });
  }

  it("refuses a pod whose own containers would read the sidecar's Secrets, opted out or not", async () => {
    const cases: [string, (pod: any) => void, string][] = [
      [
        'a volume of the provider keys',
        (pod) => {
          pod.spec.volumes = [{ name: 'keys', secret: { secretName: 'llm-keys' } }];
          pod.spec.containers[0].volumeMounts = [{ name: 'keys', mountPath: '/keys' }];
        },
        'container agent mounts volume keys of Secret llm-keys',
      ],
      [
        "a projected volume with the proxy CA's key",
        (pod) => {
          pod.spec.volumes = [
            { name: 'bundle', projected: { sources: [{ secret: { name: 'ag-agent-governance-proxy-ca' } }] } },
          ];
          pod.spec.initContainers = [
            { name: 'copy', image: 'busybox:1.36', volumeMounts: [{ name: 'bundle', mountPath: '/b' }] },
          ];
        },
        'container copy mounts volume bundle of Secret ag-agent-governance-proxy-ca',
      ],
      [
        'the metrics token read into a variable',
        (pod) => {
          pod.spec.containers[0].env = [
            {
              name: 'T',
              valueFrom: { secretKeyRef: { name: 'ag-agent-governance-sidecar-metrics-token', key: 'token' } },
            },
          ];
        },
        'container agent reads Secret ag-agent-governance-sidecar-metrics-token into variable T',
      ],
      [
        "the sidecar's API key in a variable",
        (pod) => {
          pod.spec.containers[0].env.push({
            name: 'KEY',
            valueFrom: { secretKeyRef: { name: 'acme-sidecar-key', key: 'api-key' } },
          });
        },
        'container agent reads Secret acme-sidecar-key into variable KEY',
      ],
      [
        "the tenant's NATS credentials as variables",
        (pod) => {
          pod.spec.containers[0].envFrom = [{ secretRef: { name: 'ag-agent-governance-nats-client' } }];
        },
        'container agent reads Secret ag-agent-governance-nats-client as variables',
      ],
      [
        'the API key Secret the pod names for its sidecar',
        (pod) => {
          pod.metadata.annotations = { 'agent-governance.io/api-key-secret': 'team-key' };
          pod.spec.containers[0].envFrom = [{ secretRef: { name: 'team-key' } }];
        },
        'container agent reads Secret team-key as variables',
      ],
    ];
    for (const [what, change, message] of cases) {
      for (const optOut of [undefined, 'annotation', 'label'] as const) {
        const pod = podOf(nodeAgent);
        change(pod);
        if (optOut === 'annotation')
          pod.metadata.annotations = { ...pod.metadata.annotations, 'agent-governance.io/inject': 'false' };
        if (optOut === 'label') pod.metadata.labels['agent-governance.io/inject'] = 'disabled';
        const response = await review(pod, 'agents');
        expect(response.allowed, `${what}, opted out by ${optOut}`).toBe(false);
        expect(response.status.message).toContain(message);
      }
    }
    // A Secret of the pod's own, and the same pod in an excluded namespace, are admitted.
    const own = podOf(nodeAgent);
    own.spec.containers[0].envFrom = [{ secretRef: { name: 'agent-settings' } }];
    checkGoverned(patched(own, await review(own, 'agents')));
    const system = podOf(nodeAgent);
    system.spec.containers[0].envFrom = [{ secretRef: { name: 'ag-agent-governance-nats-client' } }];
    expect((await review(system, 'kube-system')).allowed).toBe(true);
  });

  it('refuses opted-out and hostNetwork pods where the namespace enforces injection', async () => {
    const secured = (source: any) => {
      const pod = podOf(source);
      pod.metadata.namespace = 'secured';
      return pod;
    };
    for (const [source, opt] of [
      [optedOut, 'annotation agent-governance.io/inject: "false"'],
      [labelledOut, 'label agent-governance.io/inject: disabled'],
      [hostNetwork, 'hostNetwork'],
    ] as const) {
      const response = await review(secured(source), 'secured');
      expect(response.allowed).toBe(false);
      expect(response.status.message).toContain(`namespace secured enforces agent-governance injection: ${opt}`);
    }
    const injected = patched(secured(nodeAgent), await review(secured(nodeAgent), 'secured'));
    expect(injected.spec.initContainers[0].name).toBe('agent-governance-proxy');
  });

  it("refuses an update that gives another container the sidecar's volumes or swaps its image", async () => {
    const pod = podOf(nodeAgent);
    const injected = patched(pod, await review(pod, 'agents'));
    const update = async (next: any, subResource?: 'ephemeralcontainers') => {
      const res = await injector.post(podReview(next, 'agents', { previous: injected, subResource }));
      expect(res.status).toBe(200);
      return res.body.response;
    };
    const debug = (volumeMounts: any[]) => {
      const next = structuredClone(injected);
      next.spec.ephemeralContainers = [{ name: 'debugger', image: 'busybox:1.36', volumeMounts }];
      return next;
    };
    // kubectl debug with a plain container is fine; one mounting the provider keys or the
    // sidecar's store is not.
    expect(await update(debug([]), 'ephemeralcontainers')).toEqual({ uid: expect.any(String), allowed: true });
    for (const volume of ['agent-governance-provider-keys', 'agent-governance-data', 'agent-governance-ca']) {
      const response = await update(debug([{ name: volume, mountPath: '/x' }]), 'ephemeralcontainers');
      expect(response.allowed).toBe(false);
      expect(response.status.message).toContain(`container debugger mounts the sidecar's volume ${volume}`);
    }
    // kubectl debug --target: the sidecar's processes, its environment and files through /proc.
    const targeting = debug([]);
    targeting.spec.ephemeralContainers[0].targetContainerName = 'agent-governance-proxy';
    expect((await update(targeting, 'ephemeralcontainers')).status.message).toContain(
      "container debugger targets the sidecar's processes",
    );
    // The sidecar's image swapped for another: that image would get the sidecar's mounts.
    const swapped = structuredClone(injected);
    swapped.spec.initContainers[0].image = 'busybox:1.36';
    const refused = await update(swapped);
    expect(refused.allowed).toBe(false);
    expect(refused.status.message).toContain("container agent-governance-proxy mounts the sidecar's volume");
    // Another release of it (an older one, a debug tag) is refused too.
    const retagged = structuredClone(injected);
    retagged.spec.initContainers[0].image = 'agent-governance:0.1.0-debug';
    expect((await update(retagged)).status.message).toBe("the sidecar's image agent-governance:1.0.0 may not change");
    // What injection wrote on the pod stays: monitoring and the NATS NetworkPolicy select on it.
    const unmarked = structuredClone(injected);
    delete unmarked.metadata.labels['agent-governance.io/sidecar'];
    unmarked.metadata.annotations['agent-governance.io/budget'] = OTHER;
    expect((await update(unmarked)).status.message).toBe(
      "the injected pod's label agent-governance.io/sidecar, annotation agent-governance.io/budget may not change",
    );
    // A label of its own is an update like any other.
    const labelled = structuredClone(injected);
    labelled.metadata.labels.team = 'research';
    expect((await update(labelled)).allowed).toBe(true);
  });

  it('still lets a pod admitted before this check be updated, refusing only what the update adds', async () => {
    const earlier = podOf(optedOut);
    earlier.spec.volumes = [{ name: 'keys', secret: { secretName: 'llm-keys' } }];
    earlier.spec.containers[0].volumeMounts = [{ name: 'keys', mountPath: '/keys' }];
    const relabelled = structuredClone(earlier);
    relabelled.metadata.labels.team = 'batch';
    const res = await injector.post(podReview(relabelled, 'agents', { previous: earlier }));
    expect(res.body.response.allowed).toBe(true);
    const debugged = structuredClone(earlier);
    debugged.spec.ephemeralContainers = [
      { name: 'debugger', image: 'busybox:1.36', volumeMounts: [{ name: 'keys', mountPath: '/keys' }] },
    ];
    const refused = await injector.post(
      podReview(debugged, 'agents', { previous: earlier, subResource: 'ephemeralcontainers' }),
    );
    expect(refused.body.response.allowed).toBe(false);
    expect(refused.body.response.status.message).toBe(
      'only the agent-governance sidecar may read its Secrets and volumes: container debugger mounts volume keys of Secret llm-keys',
    );
  });

  it('refuses a pod that brings a sidecar container of its own, a copy of an injected pod included', async () => {
    const pod = podOf(nodeAgent);
    const injected = patched(pod, await review(pod, 'agents'));
    // kubectl debug --copy-to: the copy's volumes, not only its container, are the pod author's.
    const copy = structuredClone(injected);
    copy.spec.volumes.find((v: any) => v.name === 'agent-governance-data').persistentVolumeClaim = { claimName: 'x' };
    for (const brought of [injected, copy, podOf(withSidecar)]) {
      const response = await review(brought, 'agents');
      expect(response.allowed).toBe(false);
      expect(response.status.message).toContain(
        'already has a container agent-governance-proxy (agent-governance:1.0.0): leave it out',
      );
    }
  });

  it("refuses a pod in which the sidecar would share its processes, or its names' resolution, with the agent", async () => {
    const settings: [string, (spec: any) => void][] = [
      ['shareProcessNamespace: true', (spec) => (spec.shareProcessNamespace = true)],
      ['hostPID: true', (spec) => (spec.hostPID = true)],
      ['hostAliases', (spec) => (spec.hostAliases = [{ ip: '127.0.0.1', hostnames: ['nats.example'] }])],
      [
        'dnsPolicy: None',
        (spec) => Object.assign(spec, { dnsPolicy: 'None', dnsConfig: { nameservers: ['10.0.0.9'] } }),
      ],
      ['dnsConfig', (spec) => (spec.dnsConfig = { searches: ['attacker.example'] })],
    ];
    for (const [setting, change] of settings) {
      const pod = podOf(nodeAgent);
      change(pod.spec);
      await validateStrict(pod);
      const response = await review(pod, 'agents');
      expect(response.allowed, setting).toBe(false);
      expect(response.status.message).toContain(`kept apart from the pod's other containers with ${setting}`);
    }
  });

  it("refuses an init container that would mount the trust bundle's volume writable", async () => {
    const pod = podOf(nodeAgent);
    pod.spec.initContainers = [
      { name: 'plant', image: 'busybox:1.36', volumeMounts: [{ name: 'agent-governance-trust', mountPath: '/t' }] },
    ];
    const response = await review(pod, 'agents');
    expect(response.status.message).toContain(
      "container plant mounts the trust bundle's volume agent-governance-trust writable",
    );
    pod.spec.initContainers[0].volumeMounts[0].readOnly = true;
    checkGoverned(patched(pod, await review(pod, 'agents')));
  });

  it("injects a pod that only claims to be injected, and refuses one with a container of the sidecar's name", async () => {
    const claimed = podOf(nodeAgent);
    claimed.metadata.annotations = { 'agent-governance.io/status': 'injected' };
    checkGoverned(patched(claimed, await review(claimed, 'agents')));
    const impostor = podOf(nodeAgent);
    impostor.spec.containers.push({ name: 'agent-governance-proxy', image: 'busybox:1.36', command: ['sleep', 'inf'] });
    const refused = await review(impostor, 'agents');
    expect(refused.allowed).toBe(false);
    expect(refused.status.message).toContain('already has a container agent-governance-proxy (busybox:1.36)');
  });

  it('refuses a pod it cannot bind, naming what is missing, so no agent starts ungoverned', async () => {
    const response = await review(podOf(deployment('a', 'unbound', nodeAgent.spec.template)), 'unbound');
    expect(response.allowed).toBe(false);
    expect(response.status.code).toBe(403);
    expect(response.status.message).toContain('agent-governance.io/tenant');
    expect(response.status.message).toContain('injection.namespaces.unbound.budget');
  });

  it('refuses a pod naming another tenant than its namespace is pinned to', async () => {
    const pod = podOf(nodeAgent);
    pod.metadata.annotations = { 'agent-governance.io/tenant': 'globex' };
    const response = await review(pod, 'agents');
    expect(response.allowed).toBe(false);
    expect(response.status.message).toMatch(/globex differs from tenant acme/);
  });

  it("refuses a pod naming another API key Secret than its namespace's, and takes the namespace's own", async () => {
    const pod = podOf(nodeAgent);
    pod.metadata.annotations = { 'agent-governance.io/api-key-secret': 'globex-sidecar-key' };
    const response = await review(pod, 'agents');
    expect(response.allowed).toBe(false);
    expect(response.status.message).toMatch(/globex-sidecar-key differs from Secret acme-sidecar-key/);
    pod.metadata.annotations = { 'agent-governance.io/api-key-secret': 'acme-sidecar-key' };
    checkGoverned(patched(pod, await review(pod, 'agents')));
    // Where the namespace names none, the pod names its own.
    const own = podOf(deployment('a', 'unbound', nodeAgent.spec.template));
    own.metadata.annotations = {
      'agent-governance.io/tenant': 'globex',
      'agent-governance.io/budget': BUDGET,
      'agent-governance.io/api-key-secret': 'globex-sidecar-key',
    };
    const sidecar = patched(own, await review(own, 'unbound')).spec.initContainers[0];
    expect(sidecar.env).toContainEqual({
      name: 'SVC_API_KEY',
      valueFrom: { secretKeyRef: { name: 'globex-sidecar-key', key: 'api-key' } },
    });
  });

  it('refuses a default budget outside the allowed budgets and a malformed budget annotation', async () => {
    const pod = podOf(nodeAgent);
    pod.metadata.annotations = { 'agent-governance.io/budget': '11111111-2222-4333-8444-555555555555' };
    expect((await review(pod, 'agents')).status.message).toContain('not among the allowed budgets');
    pod.metadata.annotations = { 'agent-governance.io/budget': 'monthly' };
    expect((await review(pod, 'agents')).status.message).toContain(
      'annotation agent-governance.io/budget has an invalid value',
    );
  });

  it("lets a pod narrow its namespace's allowed budgets but never widen them", async () => {
    const elsewhere = '11111111-2222-4333-8444-555555555555';
    const pod = podOf(nodeAgent);
    pod.metadata.annotations = {
      'agent-governance.io/budget': elsewhere,
      'agent-governance.io/allowed-budgets': elsewhere,
    };
    const widened = await review(pod, 'agents');
    expect(widened.allowed).toBe(false);
    expect(widened.status.message).toContain(`names ${elsewhere}, which namespace agents does not allow`);
    pod.metadata.annotations = { 'agent-governance.io/allowed-budgets': OTHER };
    expect((await review(pod, 'agents')).status.message).toContain(`budget ${BUDGET} is not among the allowed budgets`);
    pod.metadata.annotations = { 'agent-governance.io/budget': OTHER, 'agent-governance.io/allowed-budgets': OTHER };
    const narrowed = patched(pod, await review(pod, 'agents'));
    const sidecar = narrowed.spec.initContainers[0];
    expect(sidecar.env.find((e: any) => e.name === 'SVC_ALLOWED_BUDGET_IDS').value).toBe(OTHER);
  });

  it('answers 400 to what is not an AdmissionReview, 413 above the bound, and logs each decision without secrets', async () => {
    expect((await injector.post('not json')).status).toBe(400);
    const wrong = await injector.post({ apiVersion: 'admission.k8s.io/v1beta1', kind: 'AdmissionReview' });
    expect(wrong.status).toBe(400);
    expect(wrong.body.error).toContain('apiVersion');
    expect((await injector.post('x'.repeat(5 * 1024 * 1024))).status).toBe(413);
    const lines = injector
      .log()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l): Record<string, any> => JSON.parse(l) as Record<string, any>)
      .filter((l) => l.msg === 'admission');
    expect(new Set(lines.map((l) => l.decision))).toEqual(new Set(['inject', 'skip', 'deny']));
    expect(lines.every((l) => typeof l.uid === 'string' && typeof l.namespace === 'string')).toBe(true);
    expect(injector.log()).not.toContain('BEGIN');
  });
});

describe('the plain-container sidecar for clusters before 1.29', () => {
  it('adds the proxy as the last container, without restartPolicy', async () => {
    const rendered = renderChart({ ...VALUES, sidecar: { native: false } }, { kubeVersion: 'v1.28.4' });
    const template = parseInjectionTemplate(
      JSON.parse(manifest(rendered, 'ConfigMap', 'ag-agent-governance-injector').data['template.json']),
    );
    const pod = podOf(nodeAgent);
    const ops = injectionPatch(pod, template, { tenant: 'acme', budget: BUDGET, apiKeySecret: 'k' });
    const injected = jsonpatch.applyPatch(structuredClone(pod), ops as any, true, false).newDocument;
    await validateStrict(injected);
    expect(injected.spec.initContainers).toBeUndefined();
    expect(injected.spec.containers.map((c: any) => c.name)).toEqual(['agent', 'agent-governance-proxy']);
    expect(injected.spec.containers[1].restartPolicy).toBeUndefined();
    expect(injected.spec.containers[0].env.map((e: any) => e.name)).toEqual(expect.arrayContaining(APP_ENV));
  });
});
