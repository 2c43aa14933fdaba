#!/usr/bin/env node
// Minifies an Emscripten ES-module glue in place with emcc's own JS passes (the acorn optimizer's
// JSDCE and minifyWhitespace, what a link at -O2 and up runs). For the builds that link at -O1
// (wasm_relaxed, cmake/wasm.cmake: binaryen must not touch their wasm), whose glue emcc leaves as
// written. 3.1.6's optimizer cannot print `import.meta`: it is swapped for a placeholder name and
// back. No closure compiler here: Debian's emscripten has none.
//   node wasm/minify_glue.mjs EMSCRIPTEN_ROOT FILE.mjs
import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const [root, file] = process.argv.slice(2);
if (!root || !file) { console.error('usage: minify_glue.mjs EMSCRIPTEN_ROOT FILE.mjs'); process.exit(2); }
const META = 'import.meta';
const HOLD = '__krafla_import_meta__';
const src = readFileSync(file, 'utf8');
if (src.includes(HOLD)) { console.error(`${file}: already holds ${HOLD}`); process.exit(1); }
const count = (s, x) => s.split(x).length - 1;
const tmp = `${file}.premin.mjs`;
writeFileSync(tmp, src.replaceAll(META, HOLD));
let out;
try {
  out = execFileSync(process.execPath, [join(root, 'tools', 'acorn-optimizer.js'), tmp, 'JSDCE', 'minifyWhitespace', '--exportES6'],
    { encoding: 'utf8', maxBuffer: 64 * 2 ** 20, env: { ...process.env, NODE_PATH: process.env.NODE_PATH ?? '/usr/share/nodejs' } });
} finally {
  rmSync(tmp, { force: true });
}
out = out.replaceAll(HOLD, META);
// JSDCE keeps every use of import.meta (the glue's own URL: where the .wasm and worker are).
if (count(out, META) !== count(src, META)) {
  console.error(`${file}: import.meta ${count(src, META)} times before, ${count(out, META)} after: not minified`);
  process.exit(1);
}
writeFileSync(file, out);
console.log(`minify_glue: ${file}: ${src.length} -> ${out.length} bytes`);
