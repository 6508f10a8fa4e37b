/**
 * Reads text as shell commands the way a shell would split them, so a command is recognised
 * however it is written: flags split or reordered (`rm -r -f`, `rm -fr`), quoted or escaped
 * (`r''m`, `"rm"`, `r\m`, `$'\x72m'`), `${IFS}` for spaces, behind `sudo`/`env`/`xargs`, or in
 * a script passed to `bash -c`, `ssh host`, `kubectl exec --` or `find -exec`. One linear pass.
 */

export interface Word {
  /** The word as the shell passes it: quotes removed, escapes applied (case kept). */
  readonly value: string;
  /** Span in the normalised text. */
  readonly start: number;
  readonly end: number;
}

export interface Command {
  readonly words: Word[];
  /** Its input comes from the previous command through a pipe. */
  pipeIn: boolean;
  /** Its output goes to the next command through a pipe. */
  pipeOut: boolean;
  /**
   * It is the rest of a command whose program is a substitution's output (`$(echo curl) host`,
   * `sudo $(echo curl) host`): the reader ends a command where an unquoted substitution starts,
   * so these words are what followed it.
   */
  afterProgramSubstitution?: boolean;
}

/** A span of the text read, [start, end). */
export interface Span {
  readonly start: number;
  readonly end: number;
}

export interface Script {
  readonly commands: Command[];
  /**
   * Command substitutions inside double quotes (`"$(…)"`, "`…`"): scripts the shell runs to build
   * a word, to be read as scripts of their own. Unquoted ones are read in place as commands.
   */
  readonly substitutions: Span[];
  /** Some word is built from a command's output, quoted or not: the text is more than its visible commands. */
  readonly substitutes: boolean;
}

const SEPARATORS = new Set([';', '\n', '\r', '&', '|', '(', ')', '`']);

/** Splits text into commands of words. */
export function readCommands(text: string): Script {
  const commands: Command[] = [];
  const substitutions: Span[] = [];
  let substitutes = false;
  let words: Word[] = [];
  let value = '';
  let start = -1;
  let pipeIn = false;
  /** Per open parenthesis: whether it opened a substitution where the command's program stands. */
  const opened: boolean[] = [];
  let afterProgramSubstitution = false;

  const endWord = (end: number) => {
    if (start >= 0) words.push({ value, start, end });
    value = '';
    start = -1;
  };
  const begin = (at: number) => {
    if (start < 0) start = at;
  };
  const endCommand = (pipe: boolean) => {
    if (words.length > 0) {
      commands.push(
        afterProgramSubstitution
          ? { words, pipeIn, pipeOut: pipe, afterProgramSubstitution }
          : { words, pipeIn, pipeOut: pipe },
      );
      pipeIn = pipe;
    } else {
      pipeIn = pipe && pipeIn;
    }
    words = [];
    afterProgramSubstitution = false;
  };

  const n = text.length;
  let i = 0;
  while (i < n) {
    const c = text[i] as string;
    if (c === ' ' || c === '\t') {
      endWord(i);
      i++;
      continue;
    }
    if (c === '$' && text.startsWith('${IFS}', i)) {
      endWord(i);
      i += 6;
      continue;
    }
    if (c === '$' && text.startsWith('$IFS', i) && !/[A-Za-z0-9_]/.test(text[i + 4] ?? '')) {
      endWord(i);
      i += 4;
      continue;
    }
    if (c === '$' && text[i + 1] === '(') {
      substitutes = true;
      // A substitution that starts a word where no program has been named yet gives the program.
      const atProgram = start < 0 && invocationOf({ words, pipeIn, pipeOut: false }) === null;
      endWord(i);
      endCommand(false);
      opened.push(atProgram);
      i += 2;
      continue;
    }
    if (c === '$' && text[i + 1] === "'") {
      begin(i);
      i = ansiC(text, i + 2, (s) => (value += s));
      continue;
    }
    if (c === '>' || c === '<') {
      endWord(i);
      let j = i + 1;
      while (j < n && (text[j] === '>' || text[j] === '&' || text[j] === '(')) j++;
      words.push({ value: text.slice(i, j), start: i, end: j });
      i = j;
      continue;
    }
    if (c === '&' && text[i + 1] === '>') {
      endWord(i);
      words.push({ value: '&>', start: i, end: i + 2 });
      i += 2;
      continue;
    }
    if (SEPARATORS.has(c)) {
      if (c === '`') substitutes = true;
      endWord(i);
      const pipe = c === '|' && text[i + 1] !== '|' && text[i - 1] !== '|';
      endCommand(pipe);
      if (c === '(') opened.push(false);
      // Only a word of its own after it: `$(document).ready(…)` is script text, not a command.
      if (c === ')') afterProgramSubstitution = opened.pop() === true && (text[i + 1] === ' ' || text[i + 1] === '\t');
      i++;
      continue;
    }
    if (c === ':' && start >= 0 && (text[i + 1] === ' ' || text[i + 1] === '\n' || i + 1 === n)) {
      // `run: rm -rf x`: prose or YAML before a command.
      value += c;
      endWord(i + 1);
      endCommand(false);
      i++;
      continue;
    }
    if (c === "'") {
      begin(i);
      const close = text.indexOf("'", i + 1);
      const stop = close < 0 ? n : close;
      value += text.slice(i + 1, stop);
      i = stop + 1;
      continue;
    }
    if (c === '"') {
      begin(i);
      let j = i + 1;
      while (j < n && text[j] !== '"') {
        const substitution =
          text[j] === '`'
            ? { start: j + 1, end: backquoteEnd(text, j + 1) }
            : text.startsWith('$(', j)
              ? { start: j + 2, end: substitutionEnd(text, j + 2) }
              : undefined;
        if (substitution !== undefined) {
          substitutes = true;
          substitutions.push(substitution);
          value += text.slice(j, substitution.end + 1);
          j = substitution.end + 1;
          continue;
        }
        if (text[j] === '\\' && j + 1 < n && '"\\$`'.includes(text[j + 1] as string)) j++;
        value += text[j];
        j++;
      }
      i = j + 1;
      continue;
    }
    if (c === '\\' && i + 1 < n) {
      begin(i);
      const next = text[i + 1] as string;
      if (next !== '\n') value += next;
      i += 2;
      continue;
    }
    begin(i);
    value += c;
    i++;
  }
  endWord(n);
  endCommand(false);
  return { commands, substitutions, substitutes };
}

/**
 * Where the `$(` whose text starts at `i` closes: the index of its `)`, or the text's end. Quotes
 * and substitutions nested in it are followed, so their parentheses do not close it.
 */
function substitutionEnd(text: string, i: number): number {
  const closers = [')'];
  while (i < text.length) {
    const c = text[i] as string;
    const inQuotes = closers[closers.length - 1] === '"';
    if (c === '\\') {
      i += 2;
      continue;
    }
    if (text.startsWith('$(', i)) {
      closers.push(')');
      i += 2;
      continue;
    }
    if (c === closers[closers.length - 1]) {
      closers.pop();
      if (closers.length === 0) return i;
    } else if (!inQuotes && (c === '"' || c === '(')) {
      closers.push(c === '"' ? '"' : ')');
    } else if (!inQuotes && c === "'") {
      const close = text.indexOf("'", i + 1);
      i = close < 0 ? text.length : close;
    }
    i++;
  }
  return text.length;
}

/** Where the backquoted substitution whose text starts at `i` closes: its unescaped closing backquote, or the text's end. */
function backquoteEnd(text: string, i: number): number {
  while (i < text.length && text[i] !== '`') i += text[i] === '\\' ? 2 : 1;
  return Math.min(i, text.length);
}

/** Reads a `$'...'` string from `i` (after the quote), decoding \xHH, octal and the usual escapes. */
function ansiC(text: string, i: number, emit: (s: string) => void): number {
  const n = text.length;
  while (i < n && text[i] !== "'") {
    if (text[i] === '\\' && i + 1 < n) {
      const e = text[i + 1] as string;
      const hex = /^x([0-9a-f]{1,2})/.exec(text.slice(i + 1, i + 4));
      const oct = /^([0-7]{1,3})/.exec(text.slice(i + 1, i + 4));
      if (hex) {
        emit(String.fromCharCode(Number.parseInt(hex[1] as string, 16)));
        i += 1 + hex[0].length;
      } else if (oct) {
        emit(String.fromCharCode(Number.parseInt(oct[1] as string, 8)));
        i += 1 + oct[0].length;
      } else {
        emit(e === 'n' ? '\n' : e === 't' ? '\t' : e);
        i += 2;
      }
      continue;
    }
    emit(text[i] as string);
    i++;
  }
  return i + 1;
}

/** A command with its program found behind wrappers (`sudo`, `env X=1`, `xargs -0`, `timeout 5`). */
export interface Invocation {
  /** Base name, lower case, without directory or `.exe`: `rm`, `kubectl`, `remove-item`. */
  readonly program: string;
  readonly programWord: Word;
  /** The words after the program. */
  readonly args: Word[];
  readonly command: Command;
  /** The wrappers it was found behind, by name (`sudo`, `xargs`). */
  readonly wrappers: readonly string[];
  /**
   * Its name is not written out: an expansion the script does not resolve (`$X -rf /srv` with X
   * unknown), or a substitution's output, which leaves an option first (`$(echo rm) -rf /srv`).
   */
  readonly hiddenProgram: boolean;
}

const WRAPPERS = new Set([
  'sudo',
  'doas',
  'env',
  'nohup',
  'time',
  'nice',
  'ionice',
  'command',
  'builtin',
  'exec',
  'stdbuf',
  'unbuffer',
  'xargs',
  'timeout',
  'watch',
  'caffeinate',
  'chronic',
  'busybox',
  'if',
  'elif',
  'while',
  'until',
  'then',
  'do',
  'else',
  '{',
  '!',
]);
/** Wrapper options that take a value as the next word. */
const WRAPPER_VALUE_FLAGS = new Set([
  '-u',
  '-g',
  '-h',
  '-i',
  '-n',
  '-p',
  '-l',
  '-d',
  '-e',
  '-c',
  '-s',
  '-k',
  '-C',
  '-I',
  '-L',
  '--user',
  '--group',
  '--host',
  '--other-user',
  '--prompt',
  '--role',
  '--type',
  '--chdir',
  '--close-from',
  '--signal',
  '--kill-after',
  '--adjustment',
  '--max-args',
  '--max-lines',
  '--max-procs',
  '--delimiter',
  '--replace',
  '--arg-file',
]);

/** `$name`, `${name}` and the special parameters (`$@`, `$1`…). */
const EXPANSION = /\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*)|[@*#?!$0-9-])/g;

/** A word with its expansions as far as the script shows them: a variable it assigned takes its value, any other is empty. */
export function expanded(word: string, variables: ReadonlyMap<string, string>): string {
  return word.replace(EXPANSION, (_, braced?: string, bare?: string) => variables.get(braced ?? bare ?? '') ?? '');
}

export function programName(word: string): string {
  const lower = word.toLowerCase();
  const base = lower.slice(Math.max(lower.lastIndexOf('/'), lower.lastIndexOf('\\')) + 1);
  return base.endsWith('.exe') ? base.slice(0, -4) : base;
}

/** The command's program behind its wrappers; `variables` are those the script assigned before it. */
export function invocationOf(command: Command, variables: ReadonlyMap<string, string> = new Map()): Invocation | null {
  const { words } = command;
  const wrappers: string[] = [];
  let i = 0;
  while (i < words.length) {
    const w = (words[i] as Word).value;
    if (/^[A-Za-z_][A-Za-z0-9_]*=/.test(w) || w === '$' || w === '>' || w === '#') {
      i++;
      continue;
    }
    const name = programName(w);
    if (!WRAPPERS.has(name)) break;
    wrappers.push(name);
    i++;
    // The wrapper's own options, and the duration `timeout` takes.
    while (i < words.length) {
      const o = (words[i] as Word).value;
      if (o === '--') {
        i++;
        break;
      }
      if (o.startsWith('-')) {
        i += WRAPPER_VALUE_FLAGS.has(o) && name !== 'env' ? 2 : 1;
        continue;
      }
      if (name === 'timeout' && /^\d/.test(o)) {
        i++;
        continue;
      }
      if (/^[A-Za-z_][A-Za-z0-9_]*=/.test(o)) {
        i++;
        continue;
      }
      break;
    }
  }
  const programWord = words[i];
  if (programWord === undefined) return null;
  const name = expanded(programWord.value, variables);
  return {
    program: programName(name),
    programWord,
    args: words.slice(i + 1),
    command,
    wrappers,
    hiddenProgram:
      command.afterProgramSubstitution === true ||
      name === '' ||
      name.startsWith('-') ||
      QUOTED_SUBSTITUTION.test(name),
  };
}

/** A program word built from a command's output inside double quotes (`"$(echo curl)" host`). */
const QUOTED_SUBSTITUTION = /\$\(|`/;

/** A variable's value is kept this long at most: enough for any program's name. */
const MAX_NAME = 256;

/**
 * The invocations of a script's commands, in order. A command of assignments only (`X=rm`) names
 * no program: what it assigns names the program of a later one written as the variable (`$X -rf /srv`).
 */
export function invocationsOf(commands: readonly Command[]): Invocation[] {
  const variables = new Map<string, string>();
  const invocations: Invocation[] = [];
  for (const command of commands) {
    const inv = invocationOf(command, variables);
    if (inv !== null) invocations.push(inv);
    else
      for (const { value } of command.words) {
        const eq = value.indexOf('=');
        // A name is short; a value built by doubling (`a=$a$a`) would grow without bound.
        if (eq > 0) variables.set(value.slice(0, eq), expanded(value.slice(eq + 1), variables).slice(0, MAX_NAME));
      }
  }
  return invocations;
}

/** Short option letters, case kept (`-rf` gives r, f; `-D` gives D), and long options lower-cased (`--force`, `-recurse`). */
export interface Options {
  readonly short: Set<string>;
  readonly long: Set<string>;
  readonly positional: Word[];
}

/**
 * A command's options and positional words. `valued` names the options that take the next word as
 * their value (`git -C dir`, `kubectl -n prod`): that word is not positional, so a global option
 * before the subcommand does not hide it.
 */
export function optionsOf(args: readonly Word[], valued: ReadonlySet<string> = new Set()): Options {
  const short = new Set<string>();
  const long = new Set<string>();
  const positional: Word[] = [];
  let ended = false;
  let skipValue = false;
  for (const word of args) {
    const v = word.value;
    if (skipValue) {
      skipValue = false;
      continue;
    }
    if (ended || v.length < 2 || !v.startsWith('-') || /^-\d/.test(v)) {
      if (v === '--') ended = true;
      else positional.push(word);
      continue;
    }
    skipValue = valued.has(v);
    if (v.startsWith('--')) {
      long.add((v.split('=')[0] as string).toLowerCase());
      continue;
    }
    long.add(v.toLowerCase());
    if (/^-[a-z]+$/i.test(v)) for (const letter of v.slice(1)) short.add(letter);
  }
  return { short, long, positional };
}
