/**
 * The network programs whose destinations `tool_hosts` reads, and how each one's options and
 * operands name the hosts it reaches.
 */

/** How a network program's arguments name the hosts it reaches. */
export interface Grammar {
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
export const DESTINATIONS: ReadonlyMap<string, Grammar> = new Map([
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
export const NETWORK_WRAPPERS: ReadonlyMap<string, string> = new Map([
  ['proxychains', 'f'],
  ['proxychains4', 'f'],
  ['torsocks', 'uapP'],
  ['tsocks', ''],
  ['sshpass', 'pfdP'],
]);

/** PowerShell's switches of the web cmdlets: the options that take no value. */
export const POWERSHELL_SWITCHES = new Set([
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
