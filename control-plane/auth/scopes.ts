import { SvcError } from '../../core/errors/index.ts';
import type { Principal, Scope } from '../../core/domain/index.ts';

export function hasScope(principal: Principal, scope: Scope): boolean {
  return principal.scopes.has('admin') || principal.scopes.has(scope);
}

/**
 * Refuses a credential without `scope`. `what` names the act that takes it, where it is not the
 * route's own (narrowing an envelope's policies), with details that point at it.
 */
export function requireScope(
  principal: Principal,
  scope: Scope,
  what?: { act: string; details: Record<string, unknown> },
): void {
  if (hasScope(principal, scope)) return;
  const message =
    what === undefined ? `this credential lacks the ${scope} scope` : `${what.act} takes the ${scope} scope`;
  throw new SvcError('SVC-SYS-9004', message, { required_scope: scope, ...what?.details });
}

export function requireAdministrator(principal: Principal): void {
  if (!principal.administrator) {
    throw new SvcError('SVC-SYS-9004', 'only a platform administrator may do this', { required_scope: 'admin' });
  }
}
