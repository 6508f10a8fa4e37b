import type { JsMsg } from 'nats';

const MSG_ID = 'Nats-Msg-Id';
/** A header block that holds a msg id alone, as the publishers write it, up to the id. */
const LEAD = Buffer.from(`NATS/1.0\r\n${MSG_ID}:`, 'latin1');
const CR = 13;
const LF = 10;
const SPACE = 32;
const TILDE = 126;

/** The client's message keeps its raw bytes and where its headers end, without naming them in its type. */
interface RawMsg {
  msg?: { _msg?: { hdr?: unknown }; _rdata?: unknown };
}

/**
 * The msg id of a header block of that one header, `NATS/1.0\r\nNats-Msg-Id:<value>\r\n\r\n`, whose
 * value is printable ASCII: the value as the client reads it (trimmed). Undefined for any other
 * block, which the client then decodes.
 */
export function plainMsgId(bytes: Buffer, length: number): string | undefined {
  if (length > bytes.length || length < LEAD.length + 4) return undefined;
  for (let i = 0; i < LEAD.length; i++) if (bytes[i] !== LEAD[i]) return undefined;
  let end = LEAD.length;
  for (; end < length; end++) {
    const c = bytes[end]!;
    if (c === CR) break;
    if (c < SPACE || c > TILDE) return undefined;
  }
  if (end + 4 !== length || bytes[end + 1] !== LF || bytes[end + 2] !== CR || bytes[end + 3] !== LF) return undefined;
  return bytes.toString('latin1', LEAD.length, end).trim();
}

/**
 * A JetStream message's `Nats-Msg-Id`, '' when it has none. The client decodes the whole header
 * block into a map for it, each line split and checked, for every message (some 3 % of the event
 * processor's main thread over nats-server); the block the publishers write is read in place.
 */
export function natsMsgId(msg: JsMsg): string {
  const raw = (msg as JsMsg & RawMsg).msg;
  const length = raw?._msg?.hdr;
  const bytes = raw?._rdata;
  const plain = typeof length === 'number' && Buffer.isBuffer(bytes) ? plainMsgId(bytes, length) : undefined;
  return plain ?? msg.headers?.get(MSG_ID) ?? '';
}
