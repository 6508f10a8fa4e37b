/**
 * Bundles the sidecar's entry (`proxy/main.ts`) into one ESM file that replaces
 * `dist/proxy/main.js`, after `tsc` has compiled the tree (`npm run build`). Node then loads a
 * handful of files instead of a few hundred, and keeps less module source text on its heap (see
 * docs/performance.md, "Start and idle memory"). Native and WebAssembly packages stay in
 * node_modules: lmdb and tiktoken are loaded as installed.
 *
 *   node scripts/bundle-proxy.ts
 */
import { readFile } from 'node:fs/promises';
import { relative } from 'node:path';
import { build, type Plugin } from 'esbuild';

const root = new URL('..', import.meta.url).pathname;
const out = `${root}dist/proxy/main.js`;

/**
 * A module finds files beside its compiled twin (`new URL('../../config/prices.json',
 * import.meta.url)`); inside the bundle its `import.meta.url` is rewritten to that twin's URL,
 * which `tsc` emitted into dist/ beside the files the build copies there.
 */
const ownLocation: Plugin = {
  name: 'own-location',
  setup(build) {
    build.onLoad({ filter: /\.ts$/ }, async ({ path }) => {
      const source = await readFile(path, 'utf8');
      if (!source.includes('import.meta.url')) return { contents: source, loader: 'ts' };
      const twin = relative(`${root}dist/proxy`, `${root}dist/${relative(root, path)}`).replace(/\.ts$/, '.js');
      const url = `new URL(${JSON.stringify(twin)}, import.meta.url).href`;
      return { contents: source.replaceAll('import.meta.url', url), loader: 'ts' };
    });
  },
};

await build({
  entryPoints: [`${root}proxy/main.ts`],
  outfile: out,
  bundle: true,
  // Names stay as written, so the sidecar's stack traces read as the source does.
  minifyWhitespace: true,
  minifySyntax: true,
  minifyIdentifiers: false,
  format: 'esm',
  platform: 'node',
  target: 'node24',
  // V8 keeps a source of ASCII text at one byte per character and any other at two. Strings are
  // escaped to ASCII; template literals (String.raw patterns of the built-in judge) only once
  // lowered to calls, and licence comments go to main.js.LEGAL.txt.
  supported: { 'template-literal': false },
  legalComments: 'external',
  external: ['lmdb', 'tiktoken'],
  // Bundled CommonJS packages call require() for Node's modules; ESM output has none of its own.
  banner: { js: "import{createRequire as $$cr}from'node:module';const require=$$cr(import.meta.url);" },
  plugins: [ownLocation],
  logLevel: 'warning',
});
