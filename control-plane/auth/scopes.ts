import { SvcError } from '../../core/errors/index.ts';
import type { Principal, Scope } from '../../core/domain/index.ts';

export function hasScope(principal: Principal, scope: Scope): boolean {
  return principal.scopes.has('admin') || principal.scopes.has(scope);
}

export function requireScope(principal: Principal, scope: Scope): void {
  if (!hasScope(principal, scope)) {
    throw new SvcError('SVC-SYS-9004', `this credential lacks the ${scope} scope`, { required_scope: scope });
  }
}

export function requireAdministrator(principal: Principal): void {
  if (!principal.administrator) {
    throw new SvcError('SVC-SYS-9004', 'only a platform administrator may do this', { required_scope: 'admin' });
  }
}
