const BLANK_LINE = /\r\n\r\n|\n\n|\r\r/;

/**
 * Rewrites the data of each server-sent event as it completes, passing the rest of the event
 * (its `event:` and `id:` lines) unchanged. Holds only the current incomplete event.
 */
export function createSseRewriter(rewriteData: (data: string) => string): {
  push(chunk: Buffer): string;
  end(): string;
} {
  const decoder = new TextDecoder();
  let pending = '';

  function rewriteEvent(block: string): string {
    const lines = block.split(/\r\n|\r|\n/);
    const dataLines = lines.filter((l) => l.startsWith('data:'));
    if (dataLines.length === 0) return block;
    const data = dataLines.map((l) => l.slice(5).replace(/^ /, '')).join('\n');
    const rewritten = rewriteData(data);
    if (rewritten === data) return block;
    const kept = lines.filter((l) => !l.startsWith('data:'));
    return [...kept, ...rewritten.split('\n').map((l) => `data: ${l}`)].join('\n');
  }

  return {
    push(chunk) {
      pending += decoder.decode(chunk, { stream: true });
      let out = '';
      for (let match = BLANK_LINE.exec(pending); match !== null; match = BLANK_LINE.exec(pending)) {
        out += rewriteEvent(pending.slice(0, match.index)) + match[0];
        pending = pending.slice(match.index + match[0].length);
      }
      return out;
    },
    end() {
      const rest = pending + decoder.decode();
      pending = '';
      return rest === '' ? '' : rewriteEvent(rest);
    },
  };
}
