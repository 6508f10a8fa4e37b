import { describe, expect, it } from 'vitest';
import { commitFailure } from './lmdb-commit-failure.ts';

describe('commitFailure', () => {
  it("gives the cause lmdb-js keeps in a failed commit's placeholder, and any other rejection as an Error", async () => {
    const cause = new Error('MDB_MAP_FULL: Environment mapsize limit reached');
    const placeholder = Object.assign(new Error('Commit failed (see commitError for details)'), {
      commitError: Promise.reject(cause),
    });
    expect(await commitFailure(placeholder)).toBe(cause);
    const plain = new Error('disk gone');
    expect(await commitFailure(plain)).toBe(plain);
    expect(await commitFailure('not an error')).toEqual(new Error('not an error'));
  });
});
