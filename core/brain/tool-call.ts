import { finding, type Finding } from './finding.ts';
import { classifyDestination, urlsIn, type HostPolicy } from './hosts.ts';
import { isWeakSecretPath, secretPathIn } from './paths.ts';
import type { TextView } from './text-view.ts';

/**
 * What a tool call's name and its structured arguments say beyond their texts: a tool named
 * for destroying things, a file tool pointed at a credential store, an HTTP tool deleting in
 * bulk or sending to a drop site, mail to a personal address carrying data.
 */

const DESTROY_VERB =
  /^(?:delete|drop|destroy|wipe|purge|truncate|remove|erase|nuke|format|terminate|uninstall|reset|kill|rm|del)$/;
const DESTROY_OBJECT =
  /^(?:database|databases|db|dbs|table|tables|bucket|buckets|cluster|clusters|namespace|namespaces|repo|repos|repository|repositories|project|projects|account|accounts|volume|volumes|index|indices|collection|collections|all|everything|disk|disks|instance|instances|server|servers|environment|env|backup|backups|branch|branches|users|records|schema|keyspace|stack|deployment|vm|vms|tenant|org|organization|data|dataset|datasets|storage)$/;
const READ_TOOL =
  /(?:^|[_.:/-])(?:read|cat|open|get|view|load|download|fetch|show|print|file|files|fs|tail|head)(?:$|[_.:/-])|readfile|getfile|filecontent/;
const WRITE_TOOL =
  /(?:^|[_.:/-])(?:write|create|edit|delete|remove|chmod|chown|move|rename|append|save|touch|mkdir|update|patch|list|ls|stat|exists|search|glob)(?:$|[_.:/-])/;
const PATH_KEY =
  /^(?:path|paths|file|files|filename|file_name|filepath|file_path|target|source|src|name|uri|location|attachment|attachments)$/;
const PERSONAL_MAIL =
  /@(?:gmail|googlemail|yahoo|hotmail|outlook|live|proton|protonmail|icloud|me|aol|gmx|mail|yandex|qq|163|tutanota)\.[a-z.]+$/;

function words(name: string): string[] {
  return name
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((w) => w !== '');
}

export function scanToolName(view: TextView, out: Finding[]): void {
  const parts = words(view.raw);
  const verb = parts.findIndex((p) => DESTROY_VERB.test(p));
  if (verb < 0) return;
  const whole = parts.slice(verb + 1).some((p) => DESTROY_OBJECT.test(p));
  out.push(
    finding(
      view,
      'DESTRUCTIVE',
      whole ? 0.72 : 0.35,
      whole ? 'tool.destructive_name' : 'tool.delete_name',
      0,
      view.norm.length,
    ),
  );
}

/** A top-level argument by any of the names tools use for it. */
function arg(args: Record<string, unknown>, names: readonly string[]): unknown {
  for (const [k, v] of Object.entries(args)) if (names.includes(k.toLowerCase())) return v;
  return undefined;
}

function leafView(views: readonly TextView[], field: string): TextView | undefined {
  return views.find((v) => v.field === field);
}

/**
 * Structured reading of `tool_args` (already parsed): `views` are its string leaves, named
 * `<field>.<path>`, so findings point into the argument that carried them.
 */
export function scanToolArgs(
  toolName: string,
  field: string,
  args: unknown,
  views: readonly TextView[],
  hosts: HostPolicy,
  out: Finding[],
): void {
  if (args === null || typeof args !== 'object' || Array.isArray(args)) return;
  const record = args as Record<string, unknown>;
  const tool = toolName.toLowerCase();
  const reads = READ_TOOL.test(tool) && !WRITE_TOOL.test(tool);
  const writes = WRITE_TOOL.test(tool);

  for (const view of views) {
    if (!PATH_KEY.test(view.key)) continue;
    const hit = secretPathIn(` ${view.norm}`);
    if (hit === undefined) continue;
    const weak = isWeakSecretPath(view.norm.trim());
    const weight = writes ? 0.35 : reads ? (weak ? 0.6 : 0.85) : weak ? 0.5 : 0.7;
    out.push(
      finding(
        view,
        'DATA_EXFILTRATION',
        weight,
        'secrets.read_credentials',
        Math.max(0, hit.index - 1),
        Math.max(0, hit.index - 1) + hit.length,
      ),
    );
  }

  const given = arg(record, ['method', 'http_method', 'verb']);
  const method = typeof given === 'string' ? given.toUpperCase() : '';
  const urlKey = Object.keys(record).find((k) => /^(?:url|uri|endpoint|href|link)$/i.test(k));
  const url = urlKey === undefined ? undefined : record[urlKey];
  if (typeof url === 'string' && urlKey !== undefined) {
    const view = leafView(views, `${field}.${urlKey}`);
    const target = urlsIn(url.toLowerCase())[0];
    if (view !== undefined && target !== undefined) {
      const where = classifyDestination(target.hostAndPath, hosts);
      const body = arg(record, [
        'body',
        'data',
        'json',
        'payload',
        'content',
        'form',
        'file',
        'files',
        'attachment',
        'attachments',
      ]);
      if (method === 'DELETE') {
        const bulk =
          /\/(?:all|_all|\*)(?:$|[/?])|[?&](?:all|recursive|force|purge)=(?:true|1|yes)|\/(?:bulk|purge|wipe)|\/repos\/[^/]+\/[^/?]+\/?$|\/(?:projects|databases|clusters|buckets|namespaces|orgs)\/[^/?]+\/?$/.test(
            url.toLowerCase(),
          );
        out.push(
          finding(
            view,
            'DESTRUCTIVE',
            bulk ? 0.75 : 0.45,
            bulk ? 'http.delete_bulk' : 'http.delete',
            0,
            view.norm.length,
          ),
        );
      } else if (where === 'drop' && (body !== undefined || /^(?:POST|PUT|PATCH)$/.test(method))) {
        out.push(finding(view, 'DATA_EXFILTRATION', 0.88, 'exfil.post_to_drop_site', 0, view.norm.length));
      } else if (where === 'external' && body !== undefined) {
        const sensitive = views.some(
          (v) => v.field !== view.field && secretPathIn(` ${v.norm}`) !== undefined && PATH_KEY.test(v.key),
        );
        if (sensitive) out.push(finding(view, 'DATA_EXFILTRATION', 0.85, 'exfil.file_upload', 0, view.norm.length));
      }
    }
  }

  const to = arg(record, ['to', 'recipient', 'recipients', 'email', 'cc', 'bcc']);
  const recipients = (Array.isArray(to) ? to : [to]).filter((t): t is string => typeof t === 'string');
  if (recipients.some((r) => PERSONAL_MAIL.test(r.trim().toLowerCase()))) {
    const attached = arg(record, ['attachment', 'attachments', 'files', 'file']);
    const text = views.map((v) => v.norm).join('\n');
    const carries =
      attached !== undefined ||
      /\b(?:password|credential|secret|api key|token|customer|database|dump|export|ssn|salary|payroll|confidential|internal only)\b/.test(
        text,
      );
    const view = views.find((v) => /^(?:to|recipient|recipients|email|cc|bcc)$/.test(v.key));
    if (carries && view !== undefined)
      out.push(finding(view, 'DATA_EXFILTRATION', 0.75, 'exfil.mail_to_personal', 0, view.norm.length));
  }
}
