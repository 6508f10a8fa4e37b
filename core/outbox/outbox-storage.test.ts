import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { eventDataJson, eventFromJson, eventJson, eventSize, type OutboxEvent } from './outbox-storage.ts';

describe('an outbox event as JSON', () => {
  it("is the text JSON.stringify makes of it, its size that text's bytes, its payload's JSON the bus's payload", () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1 }), fc.string({ minLength: 1 }), fc.jsonValue(), (id, subject, data) => {
        const event: OutboxEvent = { id, subject, data };
        expect(eventJson(event)).toBe(JSON.stringify(event));
        expect(eventSize(event)).toBe(Buffer.byteLength(JSON.stringify(event)));
        expect(eventDataJson(event)).toBe(JSON.stringify(data));
      }),
      { numRuns: 500 },
    );
  });

  it('leaves out a payload JSON cannot carry, as JSON.stringify does', () => {
    const event: OutboxEvent = { id: 'e-1', subject: 'svc.t.events.llm.call', data: undefined };
    expect(eventJson(event)).toBe('{"id":"e-1","subject":"svc.t.events.llm.call"}');
    expect(eventDataJson(event)).toBeUndefined();
  });

  it('read back from its text, gives that text and its payload as JSON', () => {
    const json = '{"id":"e-2","subject":"svc.t.events.llm.call","data":{"n":2,"s":"é"}}';
    const event = eventFromJson(json);
    expect(eventJson(event)).toBe(json);
    expect(eventSize(event)).toBe(Buffer.byteLength(json));
    expect(eventDataJson(event)).toBe('{"n":2,"s":"é"}');
  });
});
