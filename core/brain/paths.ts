import { RE2JS } from 're2js';
import { lazyRegex } from './lazy-regex.ts';

/**
 * What a path names, as a security team sees it: credential stores (reading or moving them is
 * taking secrets), regenerable build output (deleting it loses nothing), the root of a system
 * or home (deleting it loses everything).
 */

/** Credential and secret stores. `.env` but not `.env.example`; `id_rsa` but not `id_rsa.pub`. */
const SECRET_PATH = lazyRegex(
  String.raw`(?:^|[\s/\\'"=:@(~])(\.aws/credentials|\.aws/config|\.ssh/id_[a-z0-9]+|\.ssh/[\w.-]*_key|\.ssh/authorized_keys|/etc/shadow|/etc/gshadow|/etc/sudoers|/etc/master\.passwd|\.env(?:\.(?:local|prod|production|dev|development|staging|secret|secrets))?|\.netrc|\.pgpass|\.my\.cnf|\.git-credentials|\.docker/config\.json|\.kube/config|kubeconfig|\.npmrc|\.pypirc|\.gnupg/|\.password-store|credentials\.json|client_secret[\w.-]*\.json|service[-_]?account[\w.-]*\.json|application_default_credentials\.json|/var/run/secrets/|/run/secrets/|/proc/(?:self|\d+)/environ|\.bash_history|\.zsh_history|[\w-]+\.(?:pem|p12|pfx|keystore|jks|kdbx|ppk)|(?:private|server|tls|ssl|client|signing)[\w-]*\.key|wallet\.dat|\.vault-token|terraform\.tfstate|secrets?\.(?:ya?ml|json|txt|env)|/etc/passwd|\\config\\sam|ntds\.dit)`,
  RE2JS.CASE_INSENSITIVE,
);

/** A path component may go on after the match (`.env.example`, `id_rsa.pub`): then it is another file. */
const PATH_END = /[\s'"`;|&),}\]]/;

export function secretPathIn(text: string): { index: number; length: number } | undefined {
  const m = SECRET_PATH().matcher(text);
  let from = 0;
  while (from < text.length && m.find(from)) {
    const start = m.start(1);
    const end = m.end(1);
    const next = text[end];
    const publicCert = /(?:cert|chain|bundle|pub|public|^ca)[\w-]*\.pem$/i.test(text.slice(start, end));
    if (
      !publicCert &&
      !text.startsWith('.pub', end) &&
      (next === undefined || PATH_END.test(next) || text[end - 1] === '/')
    )
      return { index: start, length: end - start };
    from = end;
  }
  return undefined;
}

/** `/etc/passwd` names users, not secrets: reading it is reconnaissance, weaker than the rest. */
export function isWeakSecretPath(path: string): boolean {
  return /\/etc\/passwd$|\.aws\/config$|kubeconfig$|_history$/.test(path.toLowerCase());
}

const ARTIFACTS = new Set([
  'build',
  'builds',
  'dist',
  'out',
  'output',
  'target',
  'bin',
  'obj',
  'node_modules',
  '.next',
  '.nuxt',
  '.svelte-kit',
  '.turbo',
  '.parcel-cache',
  '.cache',
  'cache',
  '.gradle',
  'coverage',
  '.nyc_output',
  '__pycache__',
  '.pytest_cache',
  '.mypy_cache',
  '.ruff_cache',
  '.tox',
  '.venv',
  'venv',
  'env',
  '.eggs',
  'tmp',
  'temp',
  '.tmp',
  'logs',
  '.terraform',
  'site',
  'public/build',
  '_site',
  '.angular',
  'storybook-static',
  'test-results',
  'playwright-report',
  'reports',
  'artifacts',
  '.pnpm-store',
  '.yarn/cache',
  'deriveddata',
]);

const ARTIFACT_FILES =
  /\.(?:pyc|pyo|o|obj|class|tmp|temp|log|bak|swp|orig|rej|cache|lock)$|^\*?~$|\.ds_store$|^thumbs\.db$/i;

/** Where a path starts whatever `..` follows: `/`, a home, a drive. */
const ROOT = /^(?:~|\$home|\$\{home\}|[a-z]:)$/;

/**
 * The path (lower case, forward slashes) with `.` and `..` resolved as far as its text allows:
 * `/tmp/../etc` is `/etc`. A relative path may still climb (`../x`, `build/../..` is `..`).
 */
function resolvedPath(path: string): string {
  const p = path.toLowerCase().replace(/\\/g, '/');
  if (!/(?:^|\/)\.\.?(?:\/|$)/.test(p)) return p;
  const absolute = p.startsWith('/');
  const parts: string[] = [];
  for (const part of p.split('/')) {
    if (part === '' || part === '.') continue;
    const top = parts[parts.length - 1];
    if (part !== '..') parts.push(part);
    else if (top === undefined ? !absolute : top === '..') parts.push(part);
    else if (!ROOT.test(top ?? '')) parts.pop();
  }
  const joined = parts.join('/');
  return absolute ? `/${joined}` : joined === '' ? '.' : joined;
}

/** Regenerable output: build and cache directories, temporary files, compiled objects; never a path that climbs out of where it starts. */
export function isArtifactPath(path: string): boolean {
  const resolved = resolvedPath(path);
  if (resolved === '..' || resolved.startsWith('../')) return false;
  const p = resolved.replace(/\/\*+$|\/+$/, '');
  if (p === '') return false;
  if (/^(?:\/tmp|\/var\/tmp|\$tmpdir|\$\{tmpdir\}|\/private\/tmp)\/./.test(p)) return true;
  if (/^\$\(mktemp/.test(p)) return true;
  const last = p.slice(p.lastIndexOf('/') + 1);
  if (ARTIFACTS.has(p) || ARTIFACTS.has(last)) return true;
  return ARTIFACT_FILES.test(last);
}

/** The root, a home, the working tree itself, or a system directory: nothing survives deleting it. */
export function isCriticalPath(path: string): boolean {
  const p = resolvedPath(path);
  if (
    /^(?:\/|\/\*|\/\.\*|~|~\/|~\/\*|\$home|\$\{home\}|\$home\/\*|\.|\.\/|\*|\.\/\*|\.\.|\.\.\/|[a-z]:\/?|[a-z]:\/\*)$/.test(
      p,
    )
  )
    return true;
  return /^\/(?:etc|usr|var|bin|sbin|boot|lib|lib64|opt|srv|root|home|mnt|data|dev|sys|proc|system|library|applications|users)(?:\/[^/]*)?\/?\*?$/.test(
    p,
  ) && !/^\/(?:var\/tmp|var\/cache)/.test(p)
    ? true
    : /^[a-z]:\/(?:windows|users|program files)/.test(p);
}
