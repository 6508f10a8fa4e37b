import { describe, expect, it } from 'vitest';
import { compileFieldPath } from './field-path.ts';

describe('compileFieldPath', () => {
  it('reads top-level and nested fields', () => {
    expect(compileFieldPath('tool_name')({ tool_name: 'shell' })).toBe('shell');
    expect(compileFieldPath('request.model')({ request: { model: 'gpt-4o' } })).toBe('gpt-4o');
    expect(compileFieldPath('budget.percent_used')({ budget: { percent_used: 81.5 } })).toBe(81.5);
  });

  it('prefers a flat dotted key, as attribute maps carry them', () => {
    const read = compileFieldPath('request.model');
    expect(read({ 'request.model': 'flat', request: { model: 'nested' } })).toBe('flat');
  });

  it('reads missing fields, through scalars and nulls, as undefined', () => {
    const read = compileFieldPath('a.b.c');
    expect(read({})).toBeUndefined();
    expect(read({ a: null })).toBeUndefined();
    expect(read({ a: { b: 'text' } })).toBeUndefined();
    expect(read({ a: { b: { c: 0 } } })).toBe(0);
  });

  it('never reaches into prototypes', () => {
    expect(compileFieldPath('constructor')({})).toBeUndefined();
    expect(compileFieldPath('a.__proto__')({ a: {} })).toBeUndefined();
    expect(compileFieldPath('a.toString')({ a: {} })).toBeUndefined();
  });

  it('indexes arrays by position', () => {
    expect(compileFieldPath('tools.1')({ tools: ['a', 'b'] })).toBe('b');
  });

  it('reads keys below arguments without regard to case', () => {
    const read = compileFieldPath('arguments.amount');
    expect(read({ arguments: { Amount: 5000 } })).toBe(5000);
    expect(read({ arguments: { AMOUNT: 5000 } })).toBe(5000);
    expect(compileFieldPath('arguments.payment.amount')({ arguments: { Payment: { Amount: 7 } } })).toBe(7);
    // Keys that fold alike are read as the list of their values, whichever one the tool takes.
    expect(read({ arguments: { amount: 5, Amount: 5000 } })).toEqual([5, 5000]);
    expect(compileFieldPath('arguments.0')({ arguments: ['a'] })).toBe('a');
    expect(compileFieldPath('request.Model')({ request: { model: 'gpt-4o' } })).toBeUndefined();
  });

  it('refuses empty segments', () => {
    expect(() => compileFieldPath('a..b')).toThrow(/empty segment/);
    expect(() => compileFieldPath('.a')).toThrow(/empty segment/);
  });
});
