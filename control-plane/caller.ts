import type { Actor, Principal } from '../core/domain/index.ts';

/** Who asks, for which tenant: passed to every service call. */
export interface Caller {
  principal: Principal;
  tenant: string;
  requestId: string;
}

export function actorOf(principal: Principal): Actor {
  return { type: principal.type, id: principal.id };
}

export const SYSTEM_ACTOR: Actor = { type: 'system', id: 'control-plane' };
