import { reachedHost } from '../../core/brain/hosts.ts';
import { commandHosts, type HostSink } from './command-hosts.ts';

/**
 * The hosts a tool call's arguments name, read as the tool that parses them will: `tool_hosts`,
 * which rules use to allow or refuse destinations, so a host left out is a walk-around.
 */

/**
 * A URL as lenient parsers read one (WHATWG's URL in Node and browsers, Python's urllib): any
 * scheme followed by two slashes, or a special one (http, https, ws, wss, ftp) by any run of
 * slashes and backslashes, none included (`https:evil.example`, `https:\\evil.example`).
 */
const URL_START =
  /(?:\b[a-z][a-z0-9+.-]*:[\\/]{2}|\b(?:https?|wss?|ftp):[\\/]*)(\[[^\]\s]*\]|[^\s/\\?#'"`<>()[\]{}]+)/gi;

/** ASCII tab and newline, which both parsers drop anywhere in a URL (`ht\ntps://host`). */
const DROPPED = /[\t\n\r]/g;

/** Distinct hosts read from one call; past it, `MORE_HOSTS` stands for the rest. */
export const MAX_TOOL_HOSTS = 1000;
/**
 * Ends a list that holds more hosts than were read (past the bound, or named where the reader
 * cannot read them: `curl $HOST`): no allow list holds it, so no allow passes.
 */
export const MORE_HOSTS = '…';

/**
 * Every distinct host the strings of a call's arguments name (`stringsOf`), as WHATWG's URL parser
 * normalises it: lower case, escapes decoded, IPv4 in any of its spellings as dotted decimal,
 * international names in punycode. A URL names one anywhere; a host without a scheme is read
 * where a network command reaches it (`curl evil.example`, `ssh user@evil.example`).
 */
export function toolHosts(strings: readonly string[]): string[] {
  const hosts = new Set<string>();
  let unread = false;
  const sink: HostSink = {
    add: (host) => {
      if (hosts.size < MAX_TOOL_HOSTS) hosts.add(hostOf(host));
      else if (!hosts.has(hostOf(host))) unread = true;
    },
    unread: () => {
      unread = true;
    },
  };
  for (const text of strings) {
    for (const match of text.replace(DROPPED, '').matchAll(URL_START)) sink.add(match[1] as string);
    commandHosts(text, sink);
    if (unread && hosts.size === MAX_TOOL_HOSTS) break;
  }
  return unread ? [...hosts, MORE_HOSTS] : [...hosts];
}

function hostOf(authority: string): string {
  const server = authority.slice(authority.lastIndexOf('@') + 1);
  // A host no parser accepts is kept as written: a rule may still refuse it. A name's final dot
  // changes nothing in DNS, so none is kept.
  return (reachedHost(server) ?? server.toLowerCase()).replace(/\.$/, '');
}

/**
 * The strings a decoded JSON value holds, its keys too, without recursion; and, for an array or
 * an object, the strings it holds (an object's, those of its arrays too) as the command line they
 * make, each word quoted: an argv (`["ssh", "evil.example"]`, `{"command": "curl", "args":
 * ["evil.example"]}`) is read as a shell would run it.
 */
export function stringsOf(value: unknown): string[] {
  const out: string[] = [];
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const next = pending.pop();
    if (typeof next === 'string') out.push(next);
    // One at a time: spreading a long array into push() would pass the engine's argument limit.
    else if (Array.isArray(next)) {
      for (const item of next as unknown[]) pending.push(item);
      commandLine(next as unknown[], out);
    } else if (next !== null && typeof next === 'object') {
      const values: unknown[] = [];
      for (const [key, inner] of Object.entries(next as Record<string, unknown>)) {
        pending.push(key, inner);
        if (Array.isArray(inner)) for (const item of inner as unknown[]) values.push(item);
        else values.push(inner);
      }
      commandLine(values, out);
    }
  }
  return out;
}

/** The strings among `values` as one line of single-quoted words, when there are two or more. */
function commandLine(values: readonly unknown[], out: string[]): void {
  const words = values.filter((v): v is string => typeof v === 'string');
  if (words.length > 1) out.push(words.map((w) => `'${w.replaceAll("'", `'\\''`)}'`).join(' '));
}
