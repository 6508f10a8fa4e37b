import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { msgIds } from './msg-ids.ts';

const tenant = fc.stringMatching(/^[A-Za-z0-9_-]{1,64}$/);
/** What a caller may send as an event id, `:` and look-alikes of other kinds included. */
const callerId = fc.oneof(
  fc.string({ minLength: 1, maxLength: 200 }),
  fc
    .constantFrom('budget-deleted:', 'envelope:', 'proxy-ended:', 'event:')
    .chain((kind) => fc.tuple(tenant, fc.string()).map(([t, rest]) => `${kind}${t}:${rest}`)),
);
const id = fc.string({ minLength: 1, maxLength: 80 });

/** Every id the product makes other than a usage event's. */
const productId = fc.oneof(
  fc
    .tuple(tenant, id, fc.constantFrom('CREATED', 'RUNNING', 'TERMINATED'))
    .map(([t, e, s]) => msgIds.envelope(t, e, s)),
  fc.tuple(tenant, id).map(([t, e]) => msgIds.proxyOpened(t, e)),
  fc.tuple(tenant, id).map(([t, e]) => msgIds.proxyEnded(t, e)),
  fc.tuple(tenant, fc.uuid()).map(([t, u]) => msgIds.violation(t, u)),
  fc.tuple(tenant, id).map(([t, b]) => msgIds.budgetDeleted(t, b)),
  fc
    .tuple(tenant, id, fc.integer({ min: 1, max: 100 }))
    .map(([t, b, p]) => msgIds.budgetAlert(t, b, '2026-01-01T00:00:00.000Z', p)),
  fc.tuple(tenant, id).map(([t, b]) => msgIds.overrunPredicted(t, b, '2026-01-01T00:00:00.000Z')),
  fc.tuple(tenant, fc.constantFrom('requested', 'decided' as const), id).map(([t, w, a]) => msgIds.approval(t, w, a)),
);

describe('msg ids', () => {
  it("a caller's event id never gives the id of anything else the product publishes", () => {
    fc.assert(
      fc.property(tenant, callerId, productId, (t, eventId, other) => {
        expect(msgIds.event(t, eventId)).not.toBe(other);
      }),
    );
  });

  it("one tenant's event ids never give another tenant's, and the same tenant's the same id", () => {
    fc.assert(
      fc.property(tenant, tenant, callerId, callerId, (a, b, first, second) => {
        const same = a === b && first === second;
        expect(msgIds.event(a, first) === msgIds.event(b, second)).toBe(same);
      }),
    );
  });
});
