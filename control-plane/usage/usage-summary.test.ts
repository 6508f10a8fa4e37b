import { describe, expect, it } from 'vitest';
import type { Page, PageRequest } from '../storage/storage.ts';
import { scan, SUMMARY_SCAN_LIMIT } from './usage-summary.ts';

/** A filtered list whose storage bound answers every page empty, with a token, for `pages` pages. */
function emptyPages(pages: number): { list: (page: PageRequest) => Promise<Page<{ at: string }>>; read: () => number } {
  let read = 0;
  return {
    list: () => {
      read += 1;
      return Promise.resolve({ items: [], nextPageToken: read < pages ? String(read) : null });
    },
    read: () => read,
  };
}

describe('scan of a summary', () => {
  it('stops after as many storage pages as its record bound fills, however few records they held', async () => {
    const pages = emptyPages(1_000);
    const truncated = await scan(
      pages.list,
      (r) => r.at,
      {},
      () => undefined,
    );
    expect(truncated).toBe(true);
    expect(pages.read()).toBe(SUMMARY_SCAN_LIMIT / 100);
  });

  it('reads a short list to its end, not truncated', async () => {
    const pages = emptyPages(3);
    expect(
      await scan(
        pages.list,
        (r) => r.at,
        {},
        () => undefined,
      ),
    ).toBe(false);
    expect(pages.read()).toBe(3);
  });
});
