import { describe, expect, it } from 'vitest';
import type { EvaluationResult } from '../../policy/result.ts';
import { detectionOfEvent, sequenceOf, sequencePayload } from './detection.ts';

const event = (eventType: string, payload: Record<string, unknown>, timestamp = '2026-11-23T12:00:00+01:00') => ({
  event_id: 'evt-1',
  tenant_id: 't1',
  envelope_id: 'env-1',
  event_type: eventType,
  timestamp,
  received_at: '2026-11-23T11:00:02.5Z',
  source: 'proxy:pod-1',
  payload,
});

const denied: EvaluationResult = {
  decision: 'DENY',
  allowed: false,
  effect: 'deny',
  matched_policy: 'p1',
  matched_policy_name: 'no-exfiltration',
  matched_rule: 'r1',
  matched_action: 'tool:http_post',
  enforcement: 'BLOCK',
  reason: 'denied',
  warnings: [],
  shadow: [],
  evaluation_time_ms: 0,
};

describe('detectionOfEvent', () => {
  it('reads an anomaly event: its figures, its response, the time in UTC', () => {
    const detection = detectionOfEvent(
      event('immune.anomaly', {
        kind: 'spend',
        count: 3.5,
        baseline: 0.2,
        z: 6,
        interval_start: '2026-11-23T10:59:00.000Z',
        action: 'terminate',
        execution_id: 'exec-1',
        unrelated: 'left out',
      }),
    );
    expect(detection).toEqual({
      detection_id: 'evt-1',
      tenant_id: 't1',
      kind: 'spend',
      category: null,
      envelope_id: 'env-1',
      execution_id: 'exec-1',
      action: null,
      policy_id: null,
      rule_id: null,
      response: 'terminate',
      details: { count: 3.5, baseline: 0.2, z: 6, interval_start: '2026-11-23T10:59:00.000Z' },
      source: 'proxy:pod-1',
      detected_at: '2026-11-23T11:00:00.000Z',
      recorded_at: '2026-11-23T11:00:02.500Z',
    });
  });

  it("keeps the reporter's time as told, and the control plane's as the time it was recorded", () => {
    const detection = detectionOfEvent(event('immune.anomaly', { kind: 'call_rate' }, '9999-12-31T23:59:59Z'));
    expect(detection).toMatchObject({
      detected_at: '9999-12-31T23:59:59.000Z',
      recorded_at: '2026-11-23T11:00:02.500Z',
    });
  });

  it('reads a sequence event as the proxy publishes it', () => {
    const payload = sequencePayload(
      { category: 'DATA_EXFILTRATION', policy_id: 'p1', rule_id: 'r1' },
      'tool:http_post',
      denied,
    );
    expect(detectionOfEvent(event('immune.sequence', payload))).toMatchObject({
      kind: 'sequence',
      category: 'DATA_EXFILTRATION',
      action: 'tool:http_post',
      policy_id: 'p1',
      rule_id: 'r1',
      response: 'deny',
      details: {},
      execution_id: null,
    });
  });

  it('is no detection for another event type or an unknown kind', () => {
    expect(detectionOfEvent(event('tool.call', { kind: 'sequence' }))).toBeUndefined();
    expect(detectionOfEvent(event('immune.anomaly', { kind: 'rash' }))).toBeUndefined();
    expect(detectionOfEvent(event('immune.anomaly', {}))).toBeUndefined();
  });
});

describe('sequenceOf', () => {
  it("names a tenant sequence condition's category, or the built-in rule's from its evidence", () => {
    expect(sequenceOf({ ...denied, sequence: { category: 'DATA_EXFILTRATION' } })).toEqual({
      category: 'DATA_EXFILTRATION',
      policy_id: 'p1',
      rule_id: 'r1',
    });
    const semantic = (signal: string) => ({
      ...denied,
      semantic: {
        judge: 'builtin',
        judge_version: '1',
        category: 'DATA_EXFILTRATION',
        confidence: 0.9,
        evidence: [{ field: 'tool_args.url', start: 0, end: 10, signal, excerpt: 'https://x' }],
      },
    });
    expect(sequenceOf(semantic('sequence.secret_read_then_send'))?.category).toBe('DATA_EXFILTRATION');
    expect(sequenceOf(semantic('secrets.read_credentials'))).toBeUndefined();
    expect(sequenceOf(denied)).toBeUndefined();
  });
});
