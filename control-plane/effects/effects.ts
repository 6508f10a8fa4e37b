
/** A bus message to publish once the transaction that produced it has committed. */
export interface Publication {
  subject: string;
  data: Record<string, unknown>;
  msgId: string;
}

export interface WebhookCall {
  url: string;
  /** The JSON body; also published on the bus as `data`. */
  body: Record<string, unknown>;
  deliveryId: string;
}

/**
 * What a committed change asks the outside world to learn. Services return these instead of
 * publishing inside a transaction, so a rolled-back change announces nothing.
 */
export interface Effects {
  publications: Publication[];
  webhooks: WebhookCall[];
}

export function noEffects(): Effects {
  return { publications: [], webhooks: [] };
}

export function mergeEffects(into: Effects, from: Effects): Effects {
  into.publications.push(...from.publications);
  into.webhooks.push(...from.webhooks);
  return into;
}

