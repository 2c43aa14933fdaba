#!/usr/bin/env node
// Copies the Emscripten builds into web/dist/<preset>/ and writes web/dist/builds.json, the list
// the package chooses from. Looks in ../build/<preset>/web/ (the krafla_wasm target of every
// wasm_* preset) or in the folder given: node scripts/copy-builds.mjs [BUILD_ROOT]
import { copyFileSync, existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BUILD_ORDER } from '../src/detect.js';

const web = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const root = resolve(process.argv[2] ?? join(web, '..', 'build'));
const dist = join(web, 'dist');
rmSync(dist, { recursive: true, force: true });
mkdirSync(dist, { recursive: true });
const builds = [];
for (const name of BUILD_ORDER) {
  const from = join(root, name, 'web');
  if (!existsSync(join(from, 'krafla.mjs')) || !existsSync(join(from, 'krafla.wasm'))) continue;
  mkdirSync(join(dist, name));
  for (const f of ['krafla.mjs', 'krafla.wasm', 'krafla.worker.js']) {
    if (existsSync(join(from, f))) copyFileSync(join(from, f), join(dist, name, f));
  }
  builds.push(name);
}
// Emscripten's krafla.worker.js is a classic script (require() in node): not an ES module.
writeFileSync(join(dist, 'package.json'), '{"type": "commonjs"}\n');
writeFileSync(join(dist, 'builds.json'), `${JSON.stringify({ builds }, null, 1)}\n`);
console.log(`web/dist: ${builds.length ? builds.join(', ') : 'no builds'} (from ${root})`);
if (!builds.length) process.exit(1);
