#!/usr/bin/env node
// The package's weight (issue 17, item 6): runs `npm pack` into a temporary folder and prints a
// Markdown table of the tarball's size, its unpacked size, and every wasm and JS file's size raw
// and gzipped (node:zlib, level 9: what a server's static gzip sends). Run in web/ after
// scripts/copy-builds.mjs (the package ships web/dist):
//   npm run size            (node scripts/size-report.mjs [--json])
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

const web = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const tmp = mkdtempSync(join(tmpdir(), 'krafla-pack-'));
try {
  // --json: npm's own account of the tarball (its size and unpacked size, the file list).
  const out = execFileSync('npm', ['pack', '--json', '--pack-destination', tmp], { cwd: web, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  const [info] = JSON.parse(out);
  const tarball = join(tmp, info.filename);
  if (statSync(tarball).size !== info.size) throw new Error(`npm pack: ${info.filename} is ${statSync(tarball).size} bytes, npm said ${info.size}`);
  execFileSync('tar', ['-xzf', tarball, '-C', tmp]); // the files as a user's node_modules/krafla holds them
  const root = join(tmp, 'package');
  const files = [];
  const walk = (d) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else files.push(p);
    }
  };
  walk(root);
  const rows = files.filter((p) => /\.(wasm|m?js)$/.test(p)).sort().map((p) => {
    const bytes = readFileSync(p);
    return { file: relative(root, p), raw: bytes.length, gzip: gzipSync(bytes, { level: 9 }).length };
  });
  const unpacked = files.reduce((a, p) => a + statSync(p).size, 0);
  if (unpacked !== info.unpackedSize) throw new Error(`unpacked ${unpacked} bytes, npm said ${info.unpackedSize}`);
  if (process.argv.includes('--json')) {
    console.log(JSON.stringify({ name: info.name, version: info.version, tarball: info.size, unpacked, entries: info.entryCount, files: rows }, null, 1));
  } else {
    const kib = (n) => `${(n / 1024).toFixed(1)} KiB`;
    const sum = (pred, k) => rows.filter(pred).reduce((a, r) => a + r[k], 0);
    const isJs = (r) => !r.file.endsWith('.wasm');
    console.log([
      `${info.name}@${info.version}: tarball (npm pack) ${kib(info.size)}, unpacked ${kib(unpacked)}, ${info.entryCount} files.`,
      '',
      '| file | raw | gzip -9 |',
      '| --- | ---: | ---: |',
      ...rows.map((r) => `| ${r.file} | ${kib(r.raw)} | ${kib(r.gzip)} |`),
      `| all .wasm | ${kib(sum((r) => !isJs(r), 'raw'))} | ${kib(sum((r) => !isJs(r), 'gzip'))} |`,
      `| all JS | ${kib(sum(isJs, 'raw'))} | ${kib(sum(isJs, 'gzip'))} |`,
    ].join('\n'));
  }
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
