import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';

/**
 * What loading the proxy's code pulls in, in a fresh process (this one has loaded everything):
 * module hooks record every file loaded and Node lists the built-in modules it has loaded.
 */
function loadedByImporting(entry: string): { files: string[]; builtins: string[] } {
  const script = `
    import { registerHooks } from 'node:module';
    const files = [];
    registerHooks({ load(url, context, next) { files.push(url); return next(url, context); } });
    await import(${JSON.stringify(new URL(entry, import.meta.url).href)});
    console.log(JSON.stringify({ files, builtins: process.moduleLoadList }));
  `;
  return JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' })) as {
    files: string[];
    builtins: string[];
  };
}

describe('the proxy at start', () => {
  it('loads neither the certificate library, the token counter nor Node’s bundled fetch stack', () => {
    const { files, builtins } = loadedByImporting('../../proxy/create-proxy.ts');
    expect(files.some((f) => f.endsWith('/proxy/create-proxy.ts'))).toBe(true);
    // Loaded on the first interception, the first exact count; fetch is never used by the proxy.
    expect(files.filter((f) => /@peculiar|tsyringe|tiktoken/.test(f))).toEqual([]);
    expect(builtins.filter((b) => b.includes('deps/undici'))).toEqual([]);
  });
});
