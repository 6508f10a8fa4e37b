import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const CHART_DIR = new URL('../../charts/agent-governance', import.meta.url).pathname;
const SOURCE = new URL('./render.go', import.meta.url).pathname;
const INSTALL_DEPS = new URL('./install-deps.sh', import.meta.url).pathname;

export interface Rendered {
  manifests: { template: string; object: Record<string, any> }[];
  notes: string;
}

export interface RenderOptions {
  namespace?: string;
  releaseName?: string;
  /** API versions the cluster offers beside the built-in ones (CRDs: monitoring.coreos.com/v1, ...). */
  apiVersions?: string[];
  kubeVersion?: string;
  upgrade?: boolean;
}

let binary: { dir: string; path: string } | undefined;

/**
 * What a suite's `beforeAll(buildRenderer, RENDERER_SETUP_MS)` allows: on a machine without the
 * Debian packages the first build installs them, which takes longer than a test may.
 */
export const RENDERER_SETUP_MS = 300_000;

/** Builds test/helm/render.go (GOPATH mode, Debian's sprig and YAML packages) into a temp dir, once. */
export function buildRenderer(): string {
  if (binary !== undefined) return binary.path;
  execFileSync('bash', [INSTALL_DEPS], { stdio: 'inherit' });
  const dir = mkdtempSync(join(tmpdir(), 'helm-render-'));
  const path = join(dir, 'render');
  execFileSync('go', ['build', '-o', path, SOURCE], {
    env: {
      ...process.env,
      GOPATH: '/usr/share/gocode',
      GO111MODULE: 'off',
      GOFLAGS: '',
      GOCACHE: process.env.GOCACHE ?? join(dir, 'cache'),
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  binary = { dir, path };
  return path;
}

export function removeRenderer(): void {
  if (binary !== undefined) rmSync(binary.dir, { recursive: true, force: true });
  binary = undefined;
}

/** Renders the chart with these values over values.yaml; throws the template's error (fail, required). */
export function renderChart(values: object = {}, options: RenderOptions = {}): Rendered {
  const path = buildRenderer();
  const valuesFile = join(binary!.dir, `values-${process.pid}-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(valuesFile, JSON.stringify(values));
  const args = [
    '-chart',
    CHART_DIR,
    '-name',
    options.releaseName ?? 'ag',
    '-namespace',
    options.namespace ?? 'agent-governance',
    '-kube-version',
    options.kubeVersion ?? 'v1.30.0',
    '-values',
    valuesFile,
    ...(options.upgrade === true ? ['-upgrade'] : []),
    ...(options.apiVersions ?? []).flatMap((v) => ['-api-versions', v]),
  ];
  const run = spawnSync(path, args, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  rmSync(valuesFile, { force: true });
  if (run.status !== 0) throw new Error(run.stderr.trim());
  return JSON.parse(run.stdout) as Rendered;
}

/** The one manifest of this kind and name (and namespace when given); throws when absent or repeated. */
export function manifest(rendered: Rendered, kind: string, name: string, namespace?: string): any {
  const found = rendered.manifests
    .map((m) => m.object)
    .filter(
      (o) =>
        o.kind === kind &&
        o.metadata?.name === name &&
        (namespace === undefined || o.metadata?.namespace === namespace),
    );
  if (found.length !== 1) throw new Error(`expected one ${kind} ${name}, found ${found.length}`);
  return found[0];
}
