import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Secrets of a cluster, by `namespace/name`, each key's value decoded. */
export type ClusterSecrets = Map<string, Record<string, string>>;

/** Adds rendered Secret manifests (base64 `data`) to the secrets. */
export function addSecrets(secrets: ClusterSecrets, manifests: any[]): void {
  for (const m of manifests) {
    if (m.kind !== 'Secret') continue;
    const data = Object.fromEntries(
      Object.entries(m.metadata && m.data ? (m.data as Record<string, string>) : {}).map(([k, v]) => [
        k,
        Buffer.from(v, 'base64').toString(),
      ]),
    );
    secrets.set(`${m.metadata.namespace}/${m.metadata.name}`, data);
  }
}

/**
 * What the kubelet would give a pod's containers, on this machine: each volume becomes a temp
 * directory (emptyDir empty, secret holding its items with their mode), and each container's
 * environment is resolved (values, secretKeyRef) with every path under a mount rewritten to the
 * mount's directory. `hosts` maps cluster DNS names to local addresses.
 */
export function materialisePod(
  pod: any,
  secrets: ClusterSecrets,
  hosts: Record<string, string>,
): { dirs: string[]; env(container: any): Record<string, string> } {
  const namespace = pod.metadata.namespace as string;
  const volumeDirs = new Map<string, string>();
  for (const volume of pod.spec.volumes ?? []) {
    const dir = mkdtempSync(join(tmpdir(), `vol-${volume.name}-`));
    volumeDirs.set(volume.name, dir);
    if (volume.secret !== undefined) {
      const data = secrets.get(`${namespace}/${volume.secret.secretName}`);
      if (data === undefined) throw new Error(`Secret ${namespace}/${volume.secret.secretName} does not exist`);
      const items: { key: string; path: string }[] =
        volume.secret.items ?? Object.keys(data).map((key) => ({ key, path: key }));
      for (const { key, path } of items) {
        const value = data[key];
        if (value === undefined) throw new Error(`Secret ${volume.secret.secretName} has no key ${key}`);
        mkdirSync(join(dir, path, '..'), { recursive: true });
        writeFileSync(join(dir, path), value, { mode: volume.secret.defaultMode ?? 0o644 });
      }
    } else if (volume.emptyDir === undefined) {
      throw new Error(`volume ${volume.name}: only emptyDir and secret are materialised`);
    }
  }
  return {
    dirs: [...volumeDirs.values()],
    env(container: any): Record<string, string> {
      const mounts = [...(container.volumeMounts ?? [])]
        .map((m: any) => ({ path: m.mountPath as string, dir: volumeDirs.get(m.name) }))
        .sort((a, b) => b.path.length - a.path.length);
      const mapValue = (value: string): string => {
        let out = value;
        for (const [host, local] of Object.entries(hosts)) out = out.replaceAll(host, local);
        const mount = mounts.find((m) => out === m.path || out.startsWith(`${m.path}/`));
        if (mount !== undefined && mount.dir !== undefined) out = mount.dir + out.slice(mount.path.length);
        return out;
      };
      const env: Record<string, string> = {};
      for (const e of container.env ?? []) {
        if (e.value !== undefined) env[e.name] = mapValue(String(e.value));
        else if (e.valueFrom?.secretKeyRef !== undefined) {
          const ref = e.valueFrom.secretKeyRef;
          const value = secrets.get(`${namespace}/${ref.name}`)?.[ref.key];
          if (value !== undefined) env[e.name] = value;
          else if (ref.optional !== true) throw new Error(`${e.name}: Secret ${ref.name} key ${ref.key} missing`);
        } else throw new Error(`${e.name}: unsupported valueFrom`);
      }
      return env;
    },
  };
}
