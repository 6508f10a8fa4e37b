import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { SvcError } from '../errors/index.ts';
import type { Messaging } from './bus.ts';
import { deferMessaging } from './deferred-messaging.ts';
import { createMemoryMessaging } from './memory-messaging.ts';
import { svcCodeOf } from '../../test/harness/svc-code.ts';

const logger = pino({ level: 'silent' });

/** An opener that fails like an unreachable NATS until `reachable` is set. */
function opener() {
  const state = { reachable: false, attempts: 0, inner: createMemoryMessaging({ logger }) };
  const open = (): Promise<Messaging> => {
    state.attempts++;
    return state.reachable
      ? Promise.resolve(state.inner)
      : Promise.reject(new SvcError('SVC-SYS-9001', 'cannot connect to NATS'));
  };
  return { state, open };
}

describe('deferMessaging', () => {
  it('serves before NATS is reached (publish and requests fail fast, watches wait) and delegates once it is', async () => {
    const { state, open } = opener();
    const messaging = deferMessaging({ open, logger, retryMs: 10, onFatal: () => expect.fail('not fatal') });
    expect(messaging.healthy()).toBe(false);
    expect(await svcCodeOf(messaging.bus.publish('svc.t.events.llm.call', {}, { msgId: 'e1' }))).toBe('SVC-EVT-4001');
    expect(await svcCodeOf(messaging.requests.request('svc.t.leases.request', {}, 100))).toBe('SVC-SYS-9001');
    let opened = false;
    const bucket = messaging.keyValue.open('svc_rulesets').then((b) => ((opened = true), b));
    await new Promise((r) => setTimeout(r, 50));
    expect(opened).toBe(false);
    expect(state.attempts).toBeGreaterThan(1);

    state.reachable = true;
    await messaging.ready;
    await bucket;
    expect(messaging.healthy()).toBe(true);
    const seen: unknown[] = [];
    await state.inner.bus.subscribe('svc.t.events.>', (m) => {
      seen.push(m.data);
      return Promise.resolve();
    });
    await messaging.bus.publish('svc.t.events.llm.call', { n: 1 }, { msgId: 'e2' });
    await messaging.close();
    expect(seen).toEqual([{ n: 1 }]);
  });

  it('ends its first attempt as soon as NATS refuses, without waiting for the retries, and at once when it opens', async () => {
    const { state, open } = opener();
    const refused = deferMessaging({ open, logger, retryMs: 60_000, onFatal: () => expect.fail('not fatal') });
    await refused.firstAttempt;
    expect(state.attempts).toBe(1);
    expect(refused.healthy()).toBe(false);
    await refused.close();

    const up = opener();
    up.state.reachable = true;
    const opened = deferMessaging({ open: up.open, logger, onFatal: () => expect.fail('not fatal') });
    await opened.firstAttempt;
    expect(opened.healthy()).toBe(true);
    await opened.close();
    await state.inner.close();
  });

  it('reports a failure retrying cannot cure, and stops retrying when closed', async () => {
    const fatal: unknown[] = [];
    const bad = deferMessaging({
      open: () => Promise.reject(new SvcError('SVC-SYS-9002', 'invalid configuration: SVC_NATS_URL')),
      logger,
      onFatal: (e) => fatal.push(e),
    });
    expect(await svcCodeOf(bad.ready)).toBe('SVC-SYS-9002');
    expect(fatal).toHaveLength(1);

    const { state, open } = opener();
    const closing = deferMessaging({ open, logger, retryMs: 10, onFatal: () => expect.fail('not fatal') });
    await new Promise((r) => setTimeout(r, 30));
    await closing.close();
    expect(await svcCodeOf(closing.ready)).toBe('SVC-SYS-9001');
    const attempts = state.attempts;
    await new Promise((r) => setTimeout(r, 50));
    expect(state.attempts).toBe(attempts);
    await state.inner.close();
  });
});
