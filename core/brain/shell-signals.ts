import { finding, type Finding } from './finding.ts';
import { classifyDestination, remoteHost, urlsIn, type Destination, type HostPolicy } from './hosts.ts';
import { isArtifactPath, isCriticalPath, isWeakSecretPath, secretPathIn } from './paths.ts';
import { invocationOf, invocationsOf, optionsOf, readCommands, type Invocation, type Word } from './shell-words.ts';
import type { TextView } from './text-view.ts';

/** Nested scripts (`bash -c`, `ssh host '...'`) are read this deep at most. */
const MAX_DEPTH = 3;

interface Scan {
  readonly view: TextView;
  readonly hosts: HostPolicy;
  readonly out: Finding[];
  /** Offset of the nested script within the normalised text (its words are relative to it). */
  readonly base: number;
  readonly depth: number;
  /** Set when a script lay deeper than MAX_DEPTH: what it does was not read. */
  readonly capped: { reached: boolean };
}

type Analyzer = (inv: Invocation, scan: Scan) => void;

/**
 * What reaches a command's input through pipes: the nearest data source (a reader or a dumper),
 * the nearest payload (a decoder's or a download's output) upstream in its pipeline, and the
 * arguments of a printer just before it.
 */
interface PipeFeed {
  /** The command just before, when it prints its arguments (`echo`, `printf`). */
  readonly printed: Invocation | undefined;
  readonly source: Invocation | undefined;
  readonly payload: { readonly from: Invocation; readonly weight: number; readonly signal: string } | undefined;
}

const SHELLS = new Set(['sh', 'bash', 'zsh', 'dash', 'ksh', 'fish', 'ash', 'su']);
/** Programs that print their arguments: piped to a shell or to xargs, what they print is read. */
const PRINTERS = new Set(['echo', 'printf']);
const INTERPRETERS = new Set([
  ...SHELLS,
  'python',
  'python2',
  'python3',
  'perl',
  'ruby',
  'node',
  'php',
  'iex',
  'invoke-expression',
  'powershell',
  'pwsh',
  'source',
  '.',
]);
const FETCHERS = new Set(['curl', 'wget', 'iwr', 'invoke-webrequest', 'irm', 'invoke-restmethod', 'fetch', 'http']);
/** Commands that put a file's or a store's content on their output. */
const READERS = new Set([
  'cat',
  'less',
  'more',
  'head',
  'tail',
  'strings',
  'xxd',
  'od',
  'hexdump',
  'base64',
  'base32',
  'type',
  'get-content',
  'gc',
  'bat',
  'nl',
  'tac',
  'cp',
  'copy',
  'copy-item',
  'mv',
  'tar',
  'zip',
  '7z',
  'gzip',
  'openssl',
  'gpg',
  'awk',
  'sed',
  'grep',
  'jq',
  'env',
  'printenv',
  'set',
  'pg_dump',
  'pg_dumpall',
  'mysqldump',
  'mongodump',
  'mongoexport',
  'redis-cli',
  'sqlite3',
  'dd',
]);
const DUMPERS = new Set(['pg_dump', 'pg_dumpall', 'mysqldump', 'mongodump', 'mongoexport', 'env', 'printenv']);

function emit(
  scan: Scan,
  category: Finding['category'],
  weight: number,
  signal: string,
  from: Word,
  to: Word = from,
): void {
  scan.out.push(finding(scan.view, category, weight, signal, scan.base + from.start, scan.base + to.end));
}

function last(words: readonly Word[]): Word | undefined {
  return words[words.length - 1];
}

const lower = (w: Word) => w.value.toLowerCase();

// ---------------------------------------------------------------- destructive

function rm(inv: Invocation, scan: Scan): void {
  const o = optionsOf(inv.args);
  const powershell = [...o.long].some((f) => /^-(?:r|re|rec|recu|recur|recurs|recurse)$/.test(f) && f !== '-r');
  const recursive = o.short.has('r') || o.short.has('R') || o.long.has('--recursive') || powershell;
  const targets = o.positional.map(lower);
  if (targets.length === 0) return;
  const end = last(inv.args) ?? inv.programWord;
  if (o.long.has('--no-preserve-root') || (recursive && targets.some(isCriticalPath))) {
    emit(scan, 'DESTRUCTIVE', 0.97, 'shell.rm_critical', inv.programWord, end);
  } else if (recursive && targets.every(isArtifactPath)) {
    emit(scan, 'DESTRUCTIVE', 0.3, 'shell.rm_artifacts', inv.programWord, end);
  } else if (recursive) {
    const force = o.short.has('f') || o.long.has('--force') || o.long.has('-force') || o.long.has('-fo');
    emit(scan, 'DESTRUCTIVE', force ? 0.85 : 0.75, 'shell.rm_recursive', inv.programWord, end);
  } else if (targets.some((t) => /[*?]/.test(t)) && !targets.every(isArtifactPath)) {
    emit(scan, 'DESTRUCTIVE', 0.45, 'shell.rm_wildcard', inv.programWord, end);
  } else if (targets.some((t) => /\.(?:db|sqlite3?|sql|bak|dump|tfstate)$|\/var\/lib\/|backup/.test(t))) {
    emit(scan, 'DESTRUCTIVE', 0.6, 'shell.rm_data_file', inv.programWord, end);
  }
  logTampering(inv, scan, targets);
}

function windowsDelete(inv: Invocation, scan: Scan): void {
  const words = inv.args.map(lower);
  const s = words.includes('/s');
  const q = words.includes('/q');
  const targets = words.filter((w) => !w.startsWith('/') || w.length > 2);
  const end = last(inv.args) ?? inv.programWord;
  if (s && targets.some((t) => /^[a-z]:\\?\*?(?:\.\*)?$|^\\$|^[a-z]:\\(?:windows|users|program files)/.test(t)))
    emit(scan, 'DESTRUCTIVE', 0.97, 'shell.del_critical', inv.programWord, end);
  else if (s && targets.length > 0 && targets.every(isArtifactPath))
    emit(scan, 'DESTRUCTIVE', 0.3, 'shell.del_artifacts', inv.programWord, end);
  else if (s) emit(scan, 'DESTRUCTIVE', 0.85, 'shell.del_recursive', inv.programWord, end);
  else if (q && targets.some((t) => t.includes('*')))
    emit(scan, 'DESTRUCTIVE', 0.6, 'shell.del_wildcard', inv.programWord, end);
}

function find(inv: Invocation, scan: Scan): void {
  const words = inv.args.map(lower);
  const exec = words.findIndex((w) => w === '-exec' || w === '-execdir' || w === '-ok' || w === '-okdir');
  if (exec >= 0) {
    const stop = words.findIndex((w, i) => i > exec && (w === ';' || w === '+' || w === '\\;'));
    nested(inv.args.slice(exec + 1, stop < 0 ? undefined : stop), scan);
  }
  const deletes = words.includes('-delete') || (exec >= 0 && /^(?:rm|shred|unlink)$/.test(words[exec + 1] ?? ''));
  if (!deletes) return;
  const start = words[0] ?? '.';
  const nameAt = words.findIndex((w) => w === '-name' || w === '-iname' || w === '-path' || w === '-regex');
  const name = nameAt >= 0 ? (words[nameAt + 1] ?? '') : '';
  const end = last(inv.args) ?? inv.programWord;
  if (isArtifactPath(start) || (name !== '' && isArtifactPath(name.replace(/^\*/, 'x'))))
    emit(scan, 'DESTRUCTIVE', 0.35, 'shell.find_delete_artifacts', inv.programWord, end);
  else if (isCriticalPath(start)) emit(scan, 'DESTRUCTIVE', 0.92, 'shell.find_delete_critical', inv.programWord, end);
  else emit(scan, 'DESTRUCTIVE', 0.8, 'shell.find_delete', inv.programWord, end);
}

/** Options that take a value, before or after the subcommand, by tool. */
const GIT_VALUED = new Set(['-C', '-c', '--git-dir', '--work-tree', '--namespace', '--config-env', '--super-prefix']);
const KUBECTL_VALUED = new Set([
  '-n',
  '--namespace',
  '--context',
  '--kubeconfig',
  '--cluster',
  '--user',
  '-s',
  '--server',
  '--token',
  '--as',
  '--as-group',
  '--as-uid',
  '--certificate-authority',
  '--client-certificate',
  '--client-key',
  '--request-timeout',
  '--tls-server-name',
  '--cache-dir',
  '-v',
  '--v',
]);
const HELM_VALUED = new Set([
  '-n',
  '--namespace',
  '--kube-context',
  '--kubeconfig',
  '--registry-config',
  '--repository-config',
  '--repository-cache',
  '--kube-apiserver',
  '--kube-as-user',
  '--kube-as-group',
  '--kube-token',
  '--kube-ca-file',
  '--kube-tls-server-name',
  '--burst-limit',
  '--qps',
]);

function git(inv: Invocation, scan: Scan): void {
  const o = optionsOf(inv.args, GIT_VALUED);
  const [sub, ...rest] = o.positional.map(lower);
  const end = last(inv.args) ?? inv.programWord;
  const hit = (weight: number, signal: string) => emit(scan, 'DESTRUCTIVE', weight, signal, inv.programWord, end);
  const protectedBranch = rest.some((r) => /(?:^|[:/+])(?:main|master|trunk|prod|production|release[\w/.-]*)$/.test(r));
  switch (sub) {
    case 'push': {
      const lease = [...o.long].some((f) => f.startsWith('--force-with-lease') || f === '--force-if-includes');
      const force = o.short.has('f') || o.long.has('--force') || rest.some((r) => r.startsWith('+'));
      if (o.long.has('--mirror')) hit(0.85, 'git.push_mirror');
      else if (force) hit(protectedBranch ? 0.95 : 0.85, 'git.force_push');
      else if (lease) hit(protectedBranch ? 0.85 : 0.45, 'git.force_push_with_lease');
      else if (o.short.has('d') || o.long.has('--delete') || rest.some((r) => r.startsWith(':') && r.length > 1))
        hit(protectedBranch ? 0.9 : 0.75, 'git.delete_remote_branch');
      else if (o.long.has('--prune')) hit(0.6, 'git.push_prune');
      return;
    }
    case 'reset':
      if (o.long.has('--hard')) hit(0.75, 'git.reset_hard');
      return;
    case 'clean':
      if ((o.short.has('f') || o.long.has('--force')) && !o.short.has('n') && !o.long.has('--dry-run'))
        hit(o.short.has('x') || o.short.has('d') ? 0.75 : 0.6, 'git.clean');
      return;
    case 'branch':
      if (o.short.has('D') || (o.long.has('--delete') && (o.long.has('--force') || o.short.has('f'))))
        hit(protectedBranch ? 0.92 : 0.75, 'git.branch_force_delete');
      else if (o.short.has('d') || o.long.has('--delete')) hit(protectedBranch ? 0.8 : 0.45, 'git.branch_delete');
      return;
    case 'filter-branch':
    case 'filter-repo':
      hit(0.8, 'git.rewrite_history');
      return;
    case 'reflog':
      if (rest.includes('expire') && [...o.long].some((f) => f.startsWith('--expire'))) hit(0.7, 'git.reflog_expire');
      return;
    case 'stash':
      if (rest[0] === 'clear') hit(0.6, 'git.stash_clear');
      return;
    case 'update-ref':
      if (o.short.has('d')) hit(0.7, 'git.delete_ref');
      return;
    case 'checkout':
    case 'restore':
      if (rest.includes('.') && (o.long.has('--force') || o.short.has('f') || inv.args.some((w) => w.value === '--')))
        hit(0.55, 'git.discard_changes');
      return;
    default:
      return;
  }
}

const K8S_CRITICAL =
  /^(?:ns|namespaces?|pv|persistentvolumes?|pvc|persistentvolumeclaims?|sts|statefulsets?(?:\.apps)?|deploy|deployments?(?:\.apps)?|crds?|customresourcedefinitions?|nodes?|no|ds|daemonsets?|clusterroles?|clusterrolebindings?|mutatingwebhookconfigurations?|validatingwebhookconfigurations?|storageclass(?:es)?|sc|all)$/;

function kubectl(inv: Invocation, scan: Scan): void {
  const words = inv.args.map(lower);
  const dash = words.indexOf('--');
  const o = optionsOf(inv.args.slice(0, dash >= 0 ? dash : undefined), KUBECTL_VALUED);
  const [verb, kind = ''] = o.positional.map(lower);
  if (verb === 'exec' && dash >= 0) nested(inv.args.slice(dash + 1), scan);
  const end = last(inv.args) ?? inv.programWord;
  if (verb === 'delete') {
    const everything = o.long.has('--all') || o.long.has('--all-namespaces') || o.short.has('A');
    const kinds = kind.split(/[,/]/);
    if (everything || kinds.some((k) => K8S_CRITICAL.test(k)))
      emit(scan, 'DESTRUCTIVE', 0.92, 'k8s.delete', inv.programWord, end);
    else if (o.short.has('f') || o.long.has('--filename') || o.short.has('l') || o.long.has('--selector'))
      emit(scan, 'DESTRUCTIVE', 0.75, 'k8s.delete_manifest', inv.programWord, end);
    else if (/^(?:po|pods?|jobs?|events?|ev)$/.test(kinds[0] ?? ''))
      emit(scan, 'DESTRUCTIVE', 0.35, 'k8s.delete_pod', inv.programWord, end);
    else emit(scan, 'DESTRUCTIVE', 0.7, 'k8s.delete_resource', inv.programWord, end);
  } else if (
    (verb === 'run' || verb === 'create' || verb === 'debug') &&
    inv.args.some((w) => /--privileged|"host(?:pid|network|ipc)"\s*:\s*true|hostpath|--profile=sysadmin/i.test(w.value))
  ) {
    emit(scan, 'SUSPICIOUS', 0.8, 'k8s.privileged_pod', inv.programWord, end);
  } else if (verb === 'drain') {
    emit(scan, 'DESTRUCTIVE', 0.5, 'k8s.drain', inv.programWord, end);
  } else if (verb === 'scale' && words.some((w) => /^--replicas=0$/.test(w))) {
    emit(scan, 'DESTRUCTIVE', 0.55, 'k8s.scale_to_zero', inv.programWord, end);
  } else if (verb === 'get' && /^secrets?$/.test(kind) && (o.short.has('o') || o.long.has('--output'))) {
    const shows = words.some((w) => /^(?:-o)?(?:yaml|json|jsonpath|go-template)|^--output=/.test(w));
    if (shows) emit(scan, 'DATA_EXFILTRATION', 0.7, 'k8s.read_secret', inv.programWord, end);
  }
}

function helm(inv: Invocation, scan: Scan): void {
  const sub = lower(optionsOf(inv.args, HELM_VALUED).positional[0] ?? inv.programWord);
  if (/^(?:uninstall|delete|del|un)$/.test(sub))
    emit(scan, 'DESTRUCTIVE', 0.85, 'helm.uninstall', inv.programWord, last(inv.args) ?? inv.programWord);
}

function terraform(inv: Invocation, scan: Scan): void {
  const o = optionsOf(inv.args);
  const [sub, arg] = o.positional.map(lower);
  const end = last(inv.args) ?? inv.programWord;
  if (sub === 'destroy') emit(scan, 'DESTRUCTIVE', 0.95, 'iac.destroy', inv.programWord, end);
  else if (sub === 'apply' && o.long.has('-destroy'))
    emit(scan, 'DESTRUCTIVE', 0.92, 'iac.destroy', inv.programWord, end);
  else if (sub === 'state' && arg === 'rm') emit(scan, 'DESTRUCTIVE', 0.6, 'iac.state_rm', inv.programWord, end);
  else if (sub === 'workspace' && arg === 'delete')
    emit(scan, 'DESTRUCTIVE', 0.7, 'iac.workspace_delete', inv.programWord, end);
}

function iacDestroy(inv: Invocation, scan: Scan): void {
  const words = inv.args.map(lower);
  if (words.includes('destroy') || (words.includes('stack') && words.includes('rm')) || words.includes('remove'))
    emit(scan, 'DESTRUCTIVE', 0.9, 'iac.destroy', inv.programWord, last(inv.args) ?? inv.programWord);
}

/** Cloud CLIs: a verb that deletes, by how much it takes with it. */
function cloud(inv: Invocation, scan: Scan): void {
  const o = optionsOf(inv.args);
  const words = o.positional.map(lower);
  const end = last(inv.args) ?? inv.programWord;
  const hit = (weight: number, signal: string) => emit(scan, 'DESTRUCTIVE', weight, signal, inv.programWord, end);
  const recursive = o.long.has('--recursive') || o.short.has('r') || o.short.has('R') || o.short.has('a');
  const storage = inv.program === 'gsutil' || (words[0] === 's3' && inv.program === 'aws') || words[0] === 'storage';
  const verb = storage ? words.find((w) => /^(?:rm|rb|sync|cp|mv)$/.test(w)) : undefined;
  if (verb === 'rm') {
    hit(
      recursive || words.some((w) => w.includes('**')) ? 0.9 : 0.45,
      recursive ? 'cloud.storage_rm_recursive' : 'cloud.storage_rm',
    );
    return;
  }
  if (verb === 'rb') {
    hit(o.long.has('--force') || o.short.has('f') ? 0.92 : 0.85, 'cloud.bucket_delete');
    return;
  }
  if (verb === 'sync' && o.long.has('--delete')) {
    hit(0.6, 'cloud.sync_delete');
    return;
  }
  if (verb === 'cp' || verb === 'mv' || verb === 'sync') {
    upload(inv, scan, o.positional.slice(words.indexOf(verb) + 1));
    return;
  }
  const deleting = words.find((w) =>
    /^(?:delete|destroy|terminate|purge|remove|rm)(?:-|$)|^(?:schedule-key-deletion|delete-batch)$/.test(w),
  );
  if (deleting === undefined) {
    if (
      words.some((w) => /^get-secret-value$|^get-parameters?(?:-by-path)?$/.test(w)) ||
      (words.includes('secret') && words.includes('show'))
    )
      emit(scan, 'DATA_EXFILTRATION', 0.55, 'cloud.read_secret', inv.programWord, end);
    return;
  }
  if (/^delete-(?:message|message-batch|tags?|alarms?|object|objects|log-stream|notification)$/.test(deleting)) {
    hit(/^delete-objects$/.test(deleting) ? 0.6 : 0.3, 'cloud.delete_small');
    return;
  }
  const wholesale =
    words.some((w) =>
      /^(?:projects?|groups?|clusters?|databases?|db-instance|db-cluster|instances|sql|tables?|buckets?|keyspaces?)$/.test(
        w,
      ),
    ) ||
    /^delete-(?:db-|table|bucket|stack|cluster|file-system|repository|secret|vpc|volume|snapshot)|^terminate-|^schedule-key-deletion/.test(
      deleting,
    ) ||
    o.long.has('--skip-final-snapshot') ||
    o.long.has('--force-delete-without-recovery');
  hit(wholesale ? 0.92 : 0.8, 'cloud.delete');
}

function docker(inv: Invocation, scan: Scan): void {
  const o = optionsOf(inv.args);
  const words = o.positional.map(lower);
  const end = last(inv.args) ?? inv.programWord;
  const [a, b] = words;
  if (
    (a === 'volume' && (b === 'rm' || b === 'prune')) ||
    (a === 'compose' && b === 'down' && (o.short.has('v') || o.long.has('--volumes'))) ||
    (a === 'down' && (o.short.has('v') || o.long.has('--volumes')))
  )
    emit(scan, 'DESTRUCTIVE', 0.65, 'docker.volume_delete', inv.programWord, end);
  else if (a === 'system' && b === 'prune' && o.long.has('--volumes'))
    emit(scan, 'DESTRUCTIVE', 0.65, 'docker.prune_volumes', inv.programWord, end);
  if (a === 'exec') nested(containerCommand(inv.args), scan);
  if (a === 'run' || a === 'exec' || a === 'create') {
    const host =
      inv.args.some((w) => /^(?:\/|\/var\/run\/docker\.sock):/.test(w.value)) ||
      o.long.has('--privileged') ||
      words.some((w) => w === '--pid=host');
    if (host || inv.args.some((w) => /^--(?:privileged|pid=host|net=host|cap-add=(?:all|sys_admin))$/i.test(w.value)))
      emit(scan, 'SUSPICIOUS', 0.7, 'docker.host_escape', inv.programWord, end);
  }
}

const DOCKER_EXEC_VALUED = new Set(['-e', '--env', '--env-file', '-u', '--user', '-w', '--workdir', '--detach-keys']);

/** The command `docker exec [options] container command…` runs in the container. */
function containerCommand(args: readonly Word[]): readonly Word[] {
  let i = args.findIndex((w) => w.value === 'exec') + 1;
  while (i < args.length && (args[i] as Word).value.startsWith('-'))
    i += DOCKER_EXEC_VALUED.has((args[i] as Word).value) ? 2 : 1;
  return args.slice(i + 1);
}

function disk(weight: number, signal: string): Analyzer {
  return (inv, scan) => emit(scan, 'DESTRUCTIVE', weight, signal, inv.programWord, last(inv.args) ?? inv.programWord);
}

function dd(inv: Invocation, scan: Scan): void {
  const target = inv.args.find((w) => lower(w).startsWith('of='));
  if (target && /^of=\/dev\/(?!null|zero|stdout|stderr|fd\/)/.test(lower(target)))
    emit(scan, 'DESTRUCTIVE', 0.97, 'disk.dd_device', inv.programWord, target);
}

function partition(inv: Invocation, scan: Scan): void {
  const words = inv.args.map(lower);
  if (words.includes('-l') || words.includes('--list') || words.includes('print')) return;
  if (
    words.some((w) => /^(?:-z|--zap-all|-o|--clear|mklabel|rm|--delete|clean|mkpart)$/i.test(w)) ||
    inv.program === 'wipefs' ||
    inv.program === 'blkdiscard'
  )
    emit(scan, 'DESTRUCTIVE', 0.9, 'disk.partition', inv.programWord, last(inv.args) ?? inv.programWord);
}

function powershellRemove(inv: Invocation, scan: Scan): void {
  rm(inv, scan);
}

function format(inv: Invocation, scan: Scan): void {
  const target = inv.args[0];
  if (target && /^[a-z]:$/i.test(target.value)) emit(scan, 'DESTRUCTIVE', 0.95, 'disk.format', inv.programWord, target);
}

function sqlClient(inv: Invocation, scan: Scan): void {
  const words = inv.args.map(lower);
  if (inv.program === 'dropdb' || (inv.program === 'mysqladmin' && words.includes('drop')))
    emit(scan, 'DESTRUCTIVE', 0.92, 'sql.drop_database', inv.programWord, last(inv.args) ?? inv.programWord);
  if (inv.program === 'redis-cli' && words.some((w) => w === 'flushall' || w === 'flushdb'))
    emit(scan, 'DESTRUCTIVE', 0.9, 'redis.flush', inv.programWord, last(inv.args) ?? inv.programWord);
}

function power(inv: Invocation, scan: Scan): void {
  const words = inv.args.map(lower);
  if (inv.program === 'init' && words[0] !== '0' && words[0] !== '6') return;
  if (inv.program === 'kill' && !(words.includes('-1') && words.some((w) => w === '-9' || w === '-kill'))) return;
  emit(scan, 'DESTRUCTIVE', 0.6, 'system.shutdown', inv.programWord, last(inv.args) ?? inv.programWord);
}

function crontab(inv: Invocation, scan: Scan): void {
  if (inv.args.some((w) => w.value === '-r'))
    emit(scan, 'DESTRUCTIVE', 0.7, 'system.crontab_remove', inv.programWord, last(inv.args) ?? inv.programWord);
}

function chmodChown(inv: Invocation, scan: Scan): void {
  const o = optionsOf(inv.args);
  const [mode, ...targets] = o.positional.map(lower);
  const recursive = o.short.has('R') || o.long.has('--recursive');
  const end = last(inv.args) ?? inv.programWord;
  if (inv.program === 'chmod' && mode !== undefined) {
    if (
      /^(?:[ugoa]*\+s|[2467][0-7]{3})$/.test(mode) &&
      targets.some((t) => /(?:^|\/)(?:bash|sh|dash|zsh|python3?|perl|find|vim|env)$/.test(t))
    )
      emit(scan, 'SUSPICIOUS', 0.85, 'privesc.setuid', inv.programWord, end);
    else if (/^0?777$|^a\+rwx$/.test(mode) && recursive && targets.some(isCriticalPath))
      emit(scan, 'SUSPICIOUS', 0.75, 'privesc.world_writable', inv.programWord, end);
    else if (/^0?000$/.test(mode) && recursive && targets.some(isCriticalPath))
      emit(scan, 'DESTRUCTIVE', 0.8, 'system.lock_out', inv.programWord, end);
  }
}

function mv(inv: Invocation, scan: Scan): void {
  if (last(inv.args)?.value === '/dev/null')
    emit(scan, 'DESTRUCTIVE', 0.85, 'shell.mv_dev_null', inv.programWord, last(inv.args) ?? inv.programWord);
}

function shred(inv: Invocation, scan: Scan): void {
  const targets = optionsOf(inv.args).positional.map(lower);
  if (targets.some((t) => /history|\/var\/log|\.log$|auth\.log|wtmp|btmp|lastlog/.test(t)))
    emit(scan, 'SUSPICIOUS', 0.8, 'evasion.wipe_logs', inv.programWord, last(inv.args) ?? inv.programWord);
  else if (targets.length > 0)
    emit(scan, 'DESTRUCTIVE', 0.88, 'shell.shred', inv.programWord, last(inv.args) ?? inv.programWord);
}

function logTampering(inv: Invocation, scan: Scan, targets: readonly string[]): void {
  if (
    targets.some((t) =>
      /^\/var\/log(?:\/|$)|\.bash_history$|\.zsh_history$|\/var\/log\/audit|wtmp$|btmp$|lastlog$/.test(t),
    )
  )
    emit(scan, 'SUSPICIOUS', 0.75, 'evasion.delete_logs', inv.programWord, last(inv.args) ?? inv.programWord);
}

// ---------------------------------------------------------------- exfiltration

/** A reader or a dumper: what it puts on its output is data worth taking. */
function isDataSource(inv: Invocation): boolean {
  return READERS.has(inv.program) || DUMPERS.has(inv.program);
}

function destinationOf(words: readonly Word[], scan: Scan): { where: Destination; word: Word } | undefined {
  let best: { where: Destination; word: Word } | undefined;
  const rank: Record<Destination, number> = { internal: 0, allowed: 1, external: 2, drop: 3 };
  for (const word of words) {
    const urls = urlsIn(word.value);
    const candidates =
      urls.length > 0
        ? urls.map((u) => u.hostAndPath)
        : /^[a-z0-9-]+(?:\.[a-z0-9-]+)+(?::\d+)?(?:\/\S*)?$/i.test(word.value) &&
            !/\.(?:json|txt|csv|sql|gz|zip|tar|log|env|pem|key|yaml|yml|xml|html|js|ts|py|sh|md)$/i.test(word.value)
          ? [word.value.toLowerCase()]
          : [];
    for (const c of candidates) {
      const where = classifyDestination(c, scan.hosts);
      if (best === undefined || rank[where] > rank[best.where]) best = { where, word };
    }
  }
  return best;
}

const EXFIL_WEIGHT: Record<Destination, number> = { drop: 0.92, external: 0.78, allowed: 0.3, internal: 0.3 };

function curl(inv: Invocation, scan: Scan, feed: PipeFeed): void {
  const words = inv.args;
  let sendsFile: Word | undefined;
  let sendsStdin = false;
  let sendsData = false;
  for (let i = 0; i < words.length; i++) {
    const w = (words[i] as Word).value;
    const next = words[i + 1]?.value ?? '';
    const flag = w.split('=')[0] as string;
    const value = w.includes('=') && flag.startsWith('--') ? w.slice(flag.length + 1) : next;
    if (
      /^(?:-d|--data|--data-binary|--data-raw|--data-urlencode|--json|--post-file|--body-file|-InFile|-infile)$/i.test(
        flag,
      ) ||
      /^-d./.test(w)
    ) {
      sendsData = true;
      const v = /^-d./.test(w) ? w.slice(2) : value;
      if (v === '@-' || v === '-') sendsStdin = true;
      else if (v.startsWith('@') || /^--(?:post|body)-file$/.test(flag) || /^-infile$/i.test(flag))
        sendsFile ??= words[i + 1] ?? words[i];
    } else if (/^(?:-F|--form)$/.test(flag) && /=[@<]/.test(value)) {
      sendsFile ??= words[i + 1] ?? words[i];
    } else if (/^(?:-T|--upload-file)$/.test(flag)) {
      if (value === '-' || value === '.') sendsStdin = true;
      else sendsFile ??= words[i + 1] ?? words[i];
    }
  }
  const dest = destinationOf(words, scan);
  if (dest === undefined) return;
  const end = last(words) ?? inv.programWord;
  const source = sendsStdin || (!sendsFile && inv.command.pipeIn) ? feed.source : undefined;
  const secret = sendsFile !== undefined && secretPathIn(sendsFile.value.replace(/^[^@<]*[@<]/, ' ')) !== undefined;
  if (
    secret ||
    (source !== undefined &&
      (DUMPERS.has(source.program) || source.args.some((w) => secretPathIn(w.value) !== undefined)))
  ) {
    emit(
      scan,
      'DATA_EXFILTRATION',
      dest.where === 'internal' || dest.where === 'allowed' ? 0.6 : 0.95,
      'exfil.secret_upload',
      inv.programWord,
      end,
    );
  } else if (sendsFile !== undefined || source !== undefined) {
    emit(scan, 'DATA_EXFILTRATION', EXFIL_WEIGHT[dest.where], 'exfil.file_upload', inv.programWord, end);
  } else if (sendsData && dest.where === 'drop') {
    emit(scan, 'DATA_EXFILTRATION', 0.8, 'exfil.post_to_drop_site', inv.programWord, end);
  }
}

function netcat(inv: Invocation, scan: Scan, feed: PipeFeed): void {
  const words = inv.args.map(lower);
  const end = last(inv.args) ?? inv.programWord;
  if (words.some((w) => w === '-e' || w === '-c' || /^exec:|^system:/.test(w))) {
    emit(scan, 'SUSPICIOUS', 0.95, 'shell.reverse_shell', inv.programWord, end);
    return;
  }
  if (words.some((w) => w === '-l' || w === '-z' || w === '-zv' || w === '-vz')) return;
  const fed = inv.args.some((w) => w.value === '<') || (inv.command.pipeIn && feed.source !== undefined);
  if (fed) emit(scan, 'DATA_EXFILTRATION', 0.88, 'exfil.netcat', inv.programWord, end);
}

function upload(inv: Invocation, scan: Scan, positional: readonly Word[]): void {
  if (positional.length < 2) return;
  const target = last(positional) as Word;
  const sources = positional.slice(0, -1);
  const remote =
    remoteHost(target.value) ?? (/^(?:s3|gs|az|wasbs?|abfss?):\/\//i.test(target.value) ? 'bucket' : undefined);
  if (
    remote === undefined ||
    sources.every((s) => remoteHost(s.value) !== undefined || /^(?:s3|gs):\/\//i.test(s.value))
  )
    return;
  const where = remote === 'bucket' ? 'external' : classifyDestination(remote, scan.hosts);
  const end = target;
  const values = sources.map(lower);
  if (
    values.some((s) => secretPathIn(` ${s}`) !== undefined || /^\/etc\/|\/var\/lib\/(?:postgres|mysql|mongo)/.test(s))
  )
    emit(
      scan,
      'DATA_EXFILTRATION',
      where === 'internal' || where === 'allowed' ? 0.6 : 0.93,
      'exfil.secret_copy',
      inv.programWord,
      end,
    );
  else if (
    values.every(isArtifactPath) ||
    values.every((v) => /^(?:\.\/)?(?:dist|build|public|site|out|_site|www|html|static)(?:\/|$)/.test(v))
  )
    return;
  else if (
    values.some((s) =>
      /\.(?:sql|dump|bak|csv|sqlite3?|db|xlsx|parquet|tar(?:\.gz)?|tgz|zip)$|dump|backup|export|customers?|users|patients|payroll/.test(
        s,
      ),
    )
  )
    emit(
      scan,
      'DATA_EXFILTRATION',
      where === 'internal' || where === 'allowed' ? 0.4 : 0.82,
      'exfil.data_copy',
      inv.programWord,
      end,
    );
  else if (where === 'external' || where === 'drop')
    emit(scan, 'DATA_EXFILTRATION', 0.6, 'exfil.copy_to_remote', inv.programWord, end);
}

function copyTool(inv: Invocation, scan: Scan): void {
  const o = optionsOf(inv.args);
  const positional = inv.program === 'rclone' ? o.positional.slice(1) : o.positional;
  upload(
    inv,
    scan,
    positional.filter((w) => !/^\d+$/.test(w.value)),
  );
}

function dns(inv: Invocation, scan: Scan): void {
  for (const w of inv.args) {
    const v = w.value;
    if (/\$\(|`|\$\{?[a-z_]+\}?\./i.test(v) && v.includes('.')) {
      emit(scan, 'DATA_EXFILTRATION', 0.9, 'exfil.dns_substitution', inv.programWord, w);
      return;
    }
    const labels = v.toLowerCase().split('.');
    if (labels.length >= 3 && labels.some((l) => l.length >= 24 && /^[a-z0-9-]+$/.test(l) && /\d/.test(l))) {
      emit(scan, 'DATA_EXFILTRATION', 0.75, 'exfil.dns_encoded_label', inv.programWord, w);
      return;
    }
  }
}

// ---------------------------------------------------------------- suspicious

/** A command whose output is a payload to run: a decoder's (`base64 -d`) or a download's (`curl`). */
function payloadOf(inv: Invocation): PipeFeed['payload'] {
  const decodes =
    ((inv.program === 'base64' || inv.program === 'base32') &&
      inv.args.some((w) => /^(?:-d|--decode|-D)$/.test(w.value))) ||
    (inv.program === 'xxd' && inv.args.some((w) => w.value === '-r')) ||
    (inv.program === 'openssl' &&
      inv.args.some((w) => /^(?:base64|enc)$/.test(w.value)) &&
      inv.args.some((w) => w.value === '-d'));
  if (decodes) return { from: inv, weight: 0.92, signal: 'payload.decode_to_shell' };
  if (FETCHERS.has(inv.program)) return { from: inv, weight: 0.8, signal: 'payload.remote_script' };
  return undefined;
}

function pipeToInterpreter(inv: Invocation, scan: Scan, feed: PipeFeed): void {
  if (!inv.command.pipeIn || !INTERPRETERS.has(inv.program) || feed.payload === undefined) return;
  const { from, weight, signal } = feed.payload;
  scan.out.push(
    finding(
      scan.view,
      'SUSPICIOUS',
      weight,
      signal,
      scan.base + from.programWord.start,
      scan.base + inv.programWord.end,
    ),
  );
}

function security(inv: Invocation, scan: Scan): void {
  const words = inv.args.map(lower);
  const end = last(inv.args) ?? inv.programWord;
  const hit = (w: number, s: string) => emit(scan, 'SUSPICIOUS', w, s, inv.programWord, end);
  switch (inv.program) {
    case 'setenforce':
      if (words[0] === '0' || words[0] === 'permissive') hit(0.75, 'evasion.selinux_off');
      return;
    case 'ufw':
      if (words[0] === 'disable') hit(0.7, 'evasion.firewall_off');
      return;
    case 'iptables':
    case 'ip6tables':
      if (words.some((w) => w === '-f' || w === '--flush') && !words.some((w) => w === '-t'))
        hit(0.6, 'evasion.firewall_flush');
      return;
    case 'systemctl':
    case 'service':
      if (
        words.some((w) => /^(?:stop|disable|mask|kill)$/.test(w)) &&
        words.some((w) =>
          /^(?:auditd|falco|apparmor|firewalld|ufw|crowdstrike|falcon-sensor|osqueryd|wazuh-agent|sysmon|clamav-daemon|clamd|selinux|fail2ban|rsyslog|syslog|journald|systemd-journald|auditbeat|filebeat|datadog-agent)(?:\.service)?$/.test(
            w,
          ),
        )
      )
        hit(0.8, 'evasion.stop_security_service');
      return;
    case 'auditctl':
      if (words.includes('-d') || (words.includes('-e') && words.includes('0'))) hit(0.8, 'evasion.audit_off');
      return;
    case 'history':
      if (words.includes('-c') || words.includes('-w')) hit(0.65, 'evasion.clear_history');
      return;
    case 'unset':
      if (words.includes('histfile')) hit(0.7, 'evasion.no_history');
      return;
    case 'usermod':
    case 'gpasswd':
      if (words.some((w) => /(?:^|,)(?:sudo|wheel|root|admin|docker)(?:,|$)/.test(w)))
        hit(0.7, 'privesc.add_to_admin_group');
      return;
    case 'useradd':
    case 'adduser':
      if (
        words.includes('-o') ||
        words.some((w) => w === '0') ||
        words.some((w) => /(?:^|,)(?:sudo|wheel|root)(?:,|$)/.test(w))
      )
        hit(0.8, 'privesc.root_user');
      return;
    case 'nmap':
    case 'masscan':
    case 'zmap':
      hit(0.6, 'recon.network_scan');
      return;
    case 'hydra':
    case 'hashcat':
    case 'john':
    case 'medusa':
    case 'mimikatz':
    case 'secretsdump.py':
    case 'crackmapexec':
    case 'responder':
      hit(0.85, 'attack.credential_tool');
      return;
    case 'nsenter':
      if (
        words.some((w, i) => (w === '-t' || w === '--target') && words[i + 1] === '1') ||
        words.includes('--target=1')
      )
        hit(0.85, 'privesc.host_namespace');
      return;
    case 'xmrig':
    case 'minerd':
    case 'cpuminer':
      hit(0.9, 'abuse.cryptominer');
      return;
    case 'set-mppreference':
      if (words.some((w) => /^-disable/.test(w))) hit(0.85, 'evasion.defender_off');
      return;
    case 'vssadmin':
    case 'wbadmin':
      if (words.some((w) => w === 'delete'))
        emit(scan, 'DESTRUCTIVE', 0.95, 'system.delete_backups', inv.programWord, end);
      return;
    case 'bcdedit':
      if (words.some((w) => /recoveryenabled|bootstatuspolicy/.test(w)))
        emit(scan, 'DESTRUCTIVE', 0.85, 'system.disable_recovery', inv.programWord, end);
      return;
    case 'cipher':
      if (words.some((w) => w.startsWith('/w')))
        emit(scan, 'DESTRUCTIVE', 0.75, 'disk.wipe_free_space', inv.programWord, end);
      return;
    default:
      return;
  }
}

// ---------------------------------------------------------------- dispatch

const DESTRUCTIVE_ANALYZERS: Record<string, Analyzer> = {
  rm,
  unlink: () => undefined,
  del: windowsDelete,
  erase: windowsDelete,
  rd: windowsDelete,
  rmdir: windowsDelete,
  'remove-item': powershellRemove,
  ri: powershellRemove,
  find,
  git,
  kubectl,
  oc: kubectl,
  k: kubectl,
  helm,
  terraform,
  tofu: terraform,
  terragrunt: terraform,
  pulumi: iacDestroy,
  cdk: iacDestroy,
  serverless: iacDestroy,
  sls: iacDestroy,
  eksctl: (inv, scan) => {
    if (lower(inv.args[0] ?? inv.programWord) === 'delete') disk(0.92, 'cloud.delete')(inv, scan);
  },
  aws: cloud,
  gcloud: cloud,
  gsutil: cloud,
  az: cloud,
  doctl: cloud,
  bq: (inv, scan) => {
    if (lower(inv.args[0] ?? inv.programWord) === 'rm') disk(0.85, 'cloud.bigquery_rm')(inv, scan);
  },
  docker,
  podman: docker,
  'docker-compose': docker,
  shred,
  srm: shred,
  wipe: disk(0.9, 'shell.wipe'),
  mkfs: disk(0.97, 'disk.mkfs'),
  mke2fs: disk(0.97, 'disk.mkfs'),
  mkswap: disk(0.7, 'disk.mkswap'),
  wipefs: partition,
  blkdiscard: partition,
  fdisk: partition,
  sfdisk: partition,
  gdisk: partition,
  sgdisk: partition,
  parted: partition,
  diskpart: disk(0.8, 'disk.diskpart'),
  'format-volume': disk(0.95, 'disk.format'),
  'clear-disk': disk(0.97, 'disk.format'),
  format,
  dd,
  dropdb: sqlClient,
  mysqladmin: sqlClient,
  'redis-cli': sqlClient,
  shutdown: power,
  halt: power,
  poweroff: power,
  init: power,
  kill: power,
  'stop-computer': power,
  crontab,
  chmod: chmodChown,
  mv,
  move: mv,
};

/** Programs that only search or print text: what they are given is data, not an action. */
const TEXT_ONLY = new Set([
  'grep',
  'egrep',
  'fgrep',
  'rg',
  'ag',
  'ack',
  'echo',
  'printf',
  'git-grep',
  'man',
  'tldr',
  'apropos',
]);

/**
 * Reads every command in the text (and in nested scripts) and records what each one does.
 * Says whether the text is only commands that search or print text, and whether a script lay
 * deeper than the reader goes (`bash -c` four times over), so that the verdict is truncated.
 */
export function scanShell(view: TextView, hosts: HostPolicy, out: Finding[]): { textOnly: boolean; capped: boolean } {
  const capped = { reached: false };
  const { invocations, substitutes } = scanScript({ view, hosts, out, base: 0, depth: 0, capped }, view.folded);
  const textOnly =
    !substitutes &&
    invocations.length > 0 &&
    invocations.every(
      (inv) =>
        TEXT_ONLY.has(inv.program) ||
        (inv.program === 'git' && /^(?:grep|log|commit|show)$/.test(optionsOf(inv.args).positional[0]?.value ?? '')),
    ) &&
    !invocations.some((inv) => inv.args.some((w) => w.value === '>' || w.value === '>>'));
  return { textOnly, capped: capped.reached };
}

/** Reads a script's commands and the scripts substituted into its words. */
function scanScript(scan: Scan, text: string): { invocations: Invocation[]; substitutes: boolean } {
  const { commands, substitutions, substitutes } = readCommands(text);
  const invocations = invocationsOf(commands);
  if (scan.depth < MAX_DEPTH)
    for (const { start, end } of substitutions)
      scanScript({ ...scan, base: scan.base + start, depth: scan.depth + 1 }, text.slice(start, end));
  else if (substitutions.length > 0) scan.capped.reached = true;
  // What the pipe carries is carried forward command by command, so a pipeline is read in one pass.
  let feed: PipeFeed = { printed: undefined, source: undefined, payload: undefined };
  for (const written of invocations) {
    const inv = withPrintedArguments(written, feed);
    const program = inv.program.startsWith('mkfs.') ? 'mkfs' : inv.program;
    const analyzer = Object.hasOwn(DESTRUCTIVE_ANALYZERS, program) ? DESTRUCTIVE_ANALYZERS[program] : undefined;
    analyzer?.(inv, scan);
    if (inv.hiddenProgram) hiddenProgram(inv, scan);
    printedScript(inv, scan, feed);
    if (FETCHERS.has(program)) curl(inv, scan, feed);
    else if (/^(?:nc|ncat|netcat|socat|telnet)$/.test(program)) netcat(inv, scan, feed);
    else if (/^(?:scp|rsync|sftp|rclone|pscp)$/.test(program)) copyTool(inv, scan);
    else if (/^(?:nslookup|dig|host|drill|ping|resolve-dnsname)$/.test(program)) dns(inv, scan);
    else security(inv, scan);
    if (READERS.has(program)) readsSecret(inv, scan);
    pipeToInterpreter(inv, scan, feed);
    scriptArguments(inv, scan);
    feed = {
      printed: PRINTERS.has(inv.program) ? inv : undefined,
      source: isDataSource(inv) ? inv : inv.command.pipeIn ? feed.source : undefined,
      payload: payloadOf(inv) ?? (inv.command.pipeIn ? feed.payload : undefined),
    };
  }
  return { invocations, substitutes };
}

/** The arguments a printer prints: all but its leading options (`echo -n`, `echo -e`). */
function printedArguments(printer: Invocation): readonly Word[] {
  const first = printer.args.findIndex((w) => !/^-[neE]+$/.test(w.value));
  return first < 0 ? [] : printer.args.slice(first);
}

/** The words a printer prints, split as xargs splits them. */
function printedWords(printer: Invocation): Word[] {
  return printedArguments(printer).flatMap((w) =>
    w.value
      .split(/\s+/)
      .filter((v) => v !== '')
      .map((value) => ({ value, start: w.start, end: w.end })),
  );
}

/** `echo /srv | xargs rm -rf`: xargs hands the program what was printed into it as arguments. */
function withPrintedArguments(inv: Invocation, feed: PipeFeed): Invocation {
  if (!inv.wrappers.includes('xargs') || !inv.command.pipeIn || feed.printed === undefined) return inv;
  return { ...inv, args: [...inv.args, ...printedWords(feed.printed)] };
}

/** `printf 'rm -rf /srv' | sh`: a shell reading its script from a printer runs what was printed. */
function printedScript(inv: Invocation, scan: Scan, feed: PipeFeed): void {
  if (!SHELLS.has(inv.program) || !inv.command.pipeIn || feed.printed === undefined) return;
  const printed = printedArguments(feed.printed);
  if (printed.length === 1) nestedScript(printed[0] as Word, scan);
  else nested(printed, scan);
}

/**
 * A program the reader cannot name (`$X -rf /srv`, `$(echo rm) -rf /srv`) is judged by its
 * arguments: options and targets that would destroy if it were `rm` are hidden destruction.
 */
function hiddenProgram(inv: Invocation, scan: Scan): void {
  const o = optionsOf(inv.programWord.value.startsWith('-') ? [inv.programWord, ...inv.args] : inv.args);
  const recursive = o.short.has('r') || o.short.has('R') || o.long.has('--recursive');
  const force = o.short.has('f') || o.long.has('--force');
  const targets = o.positional.map(lower);
  const destroys = o.long.has('--no-preserve-root') || (recursive && (force || targets.some(isCriticalPath)));
  if (!destroys || (targets.length > 0 && targets.every(isArtifactPath))) return;
  const end = last(inv.args) ?? inv.programWord;
  emit(scan, 'DESTRUCTIVE', 0.6, 'shell.hidden_program', inv.programWord, end);
  emit(scan, 'SUSPICIOUS', 0.6, 'evasion.hidden_program', inv.programWord, end);
}

/** A reader on a credential store takes its secrets. */
function readsSecret(inv: Invocation, scan: Scan): void {
  if (inv.program === 'env' || inv.program === 'printenv' || inv.program === 'set') {
    if (inv.command.pipeOut)
      emit(
        scan,
        'DATA_EXFILTRATION',
        0.55,
        'secrets.dump_environment',
        inv.programWord,
        last(inv.args) ?? inv.programWord,
      );
    return;
  }
  for (const w of readArguments(inv)) {
    const hit = secretPathIn(` ${w.value}`);
    if (hit === undefined) continue;
    const weak = isWeakSecretPath(w.value);
    emit(
      scan,
      'DATA_EXFILTRATION',
      weak ? 0.6 : 0.85,
      weak ? 'secrets.read_system_file' : 'secrets.read_credentials',
      inv.programWord,
      w,
    );
    return;
  }
}

const COPIERS = new Set(['cp', 'copy', 'copy-item', 'mv']);

/**
 * The words a reader reads. A copy reads its sources, not its destination: `cp .env.example .env`
 * writes a credential file from a template, it takes nothing from one.
 */
function readArguments(inv: Invocation): readonly Word[] {
  if (!COPIERS.has(inv.program)) return inv.args;
  const o = optionsOf(inv.args);
  const targetGiven = inv.args.some((w) => /^(?:-t|--target-directory(?:=.*)?|-destination)$/i.test(w.value));
  return targetGiven || o.positional.length < 2 ? o.positional : o.positional.slice(0, -1);
}

/** Scripts handed to another program: `bash -c '...'`, `ssh host '...'`, `powershell -Command ...`, `cmd /c ...`. */
function scriptArguments(inv: Invocation, scan: Scan): void {
  const { args } = inv;
  if (scan.depth >= MAX_DEPTH) {
    if (args.length > 0 && (inv.program === 'eval' || inv.program === 'ssh' || isShellLike(inv.program)))
      scan.capped.reached = true;
    return;
  }
  if (inv.program === 'eval') {
    if (args.length === 1) nestedScript(args[0] as Word, scan);
    else nested(args, scan);
    return;
  }
  if (isShellLike(inv.program)) {
    // A shell's -c may come with other letters: `bash -lc`, `sh -ec`.
    const at = args.findIndex(
      (w) =>
        /^(?:-c|-command|\/c|\/k)$/i.test(w.value) || (SHELLS.has(inv.program) && /^-[a-z]*c[a-z]*$/.test(w.value)),
    );
    if (at >= 0 && args[at + 1] !== undefined) {
      if (SHELLS.has(inv.program) || args.length === at + 2) nestedScript(args[at + 1] as Word, scan);
      else nested(args.slice(at + 1), scan);
    }
    return;
  }
  if (inv.program === 'ssh') {
    const o = optionsOf(args);
    const valueFlags = new Set([
      '-i',
      '-p',
      '-l',
      '-o',
      '-F',
      '-J',
      '-L',
      '-R',
      '-D',
      '-W',
      '-b',
      '-c',
      '-E',
      '-m',
      '-S',
      '-w',
    ]);
    let i = 0;
    while (i < args.length && (args[i] as Word).value.startsWith('-'))
      i += valueFlags.has((args[i] as Word).value) ? 2 : 1;
    const rest = args.slice(i + 1);
    if (rest.length === 1) nestedScript(rest[0] as Word, scan);
    else if (rest.length > 1) nested(rest, scan);
    void o;
  }
}

/** A program that runs a script handed to it: a shell, PowerShell, `cmd`. */
function isShellLike(program: string): boolean {
  return SHELLS.has(program) || /^(?:powershell|pwsh|cmd)$/.test(program);
}

/** Words that form a command of their own (`find -exec rm -rf {} ;`, `kubectl exec -- rm -rf /`). */
function nested(words: readonly Word[], scan: Scan): void {
  if (words.length === 0) return;
  if (scan.depth >= MAX_DEPTH) {
    scan.capped.reached = true;
    return;
  }
  const inv = invocationOf({ words: [...words], pipeIn: false, pipeOut: false });
  if (inv === null) return;
  const program = inv.program.startsWith('mkfs.') ? 'mkfs' : inv.program;
  const analyzer = Object.hasOwn(DESTRUCTIVE_ANALYZERS, program) ? DESTRUCTIVE_ANALYZERS[program] : undefined;
  analyzer?.(inv, { ...scan, depth: scan.depth + 1 });
  if (program !== 'find' && (SHELLS.has(program) || program === 'ssh' || program === 'eval'))
    scriptArguments(inv, { ...scan, depth: scan.depth + 1 });
}

/** A script held in one word: its text is read again as commands, spans kept in the outer text. */
function nestedScript(word: Word, scan: Scan): void {
  // Quotes were removed from the word's value, so the value is offset from the word's start by its opening quote.
  const raw = scan.view.folded.slice(scan.base + word.start, scan.base + word.end);
  const lead = raw.length > word.value.length && /^["'$]/.test(raw) ? (raw.startsWith("$'") ? 2 : 1) : 0;
  const clean = raw.length - lead - word.value.length <= 1 && raw.slice(lead).startsWith(word.value);
  scanScript(
    { ...scan, base: clean ? scan.base + word.start + lead : scan.base + word.start, depth: scan.depth + 1 },
    clean ? word.value : word.value,
  );
}
