#!/usr/bin/env node
// The demo's static server: node demo/server.mjs [PORT] [coi] [--models DIR]...
//   /            web/ (so /demo/, /src/ and /dist/ are all reachable)
//   /models/X    X from the model folders: ../shared/models (or $KRAFLA_SHARED/models) and each --models DIR
//   /models/index.json  the models in those folders, read at each request (a file dropped in shows up
//                on the next reload): [{name, url, tokenizer?, kind, size}], see listModels
// With `coi` it sends Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy:
// require-corp, which make the page cross-origin isolated: SharedArrayBuffer, hence the threaded
// (pthreads) builds. `?throttle=KBPS` on any file slows its transfer (tests watch the progress bar).
// With `--count` it counts the requests for each path and answers /__requests with those counts
// as JSON (`?reset=1`: and starts over): the tests check that the package fetches each file once.
import { closeSync, createReadStream, openSync, readdirSync, readSync, statSync } from 'node:fs';
import { createServer } from 'node:http';
import { dirname, extname, join, normalize, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const webRoot = resolve(here, '..');
const args = process.argv.slice(2);
const port = Number(args.find((a) => /^\d+$/.test(a)) ?? 8080);
const coi = args.includes('coi');
const counting = args.includes('--count');
const counts = new Map();
const modelDirs = [];
for (let i = 0; i < args.length; ++i) if (args[i] === '--models') modelDirs.push(resolve(args[++i]));
const shared = process.env.KRAFLA_SHARED ? resolve(process.env.KRAFLA_SHARED) : resolve(webRoot, '..', '..', 'shared');
modelDirs.push(join(shared, 'models'));

const TYPES = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.mjs': 'text/javascript', '.css': 'text/css',
  '.json': 'application/json', '.wasm': 'application/wasm', '.png': 'image/png', '.svg': 'image/svg+xml',
  '.ts': 'text/plain', '.md': 'text/markdown',
};

function inside(root, rel) {
  const p = normalize(join(root, rel));
  return p === root || p.startsWith(root + sep) ? p : null;
}

function locate(pathname) {
  if (pathname.startsWith('/models/')) {
    const rel = decodeURIComponent(pathname.slice('/models/'.length));
    for (const d of modelDirs) {
      const p = inside(d, rel);
      try { if (p && statSync(p).isFile()) return p; } catch { /* next folder */ }
    }
    return null;
  }
  let rel = decodeURIComponent(pathname);
  if (rel.endsWith('/')) rel += 'index.html';
  const p = inside(webRoot, rel);
  try { return p && statSync(p).isFile() ? p : null; } catch { return null; }
}

// A llama2.c checkpoint's vocabulary size (the 6th int32 of its header; negative: unshared classifier).
function llama2cVocab(file) {
  const b = Buffer.alloc(28);
  const fd = openSync(file, 'r');
  try { readSync(fd, b, 0, 28, 0); } finally { closeSync(fd); }
  return Math.abs(b.readInt32LE(20));
}

/**
 * The models of the model folders (two levels deep): .mlb and .gguf files, llama2.c checkpoints
 * (a .bin that is not a tokenizer) with the tokenizer of their vocabulary beside them (tokN.bin,
 * else tokenizer.bin), and Hugging Face folders (config.json and *.safetensors) as URLs ending in /.
 * The first folder that has a name wins.
 */
function listModels() {
  const seen = new Map();
  const add = (m) => { if (!seen.has(m.url)) seen.set(m.url, m); };
  const walk = (root, rel, depth) => {
    let entries;
    try { entries = readdirSync(join(root, rel), { withFileTypes: true }); } catch { return; }
    const names = entries.map((e) => e.name);
    const url = (n) => `/models/${[...rel.split('/').filter(Boolean), n].map(encodeURIComponent).join('/')}`;
    if (rel && names.includes('config.json') && names.some((n) => n.endsWith('.safetensors'))) {
      add({ name: rel.split('/').pop(), url: `${url('')}`.replace(/\/?$/, '/'), kind: 'hf' });
      return;
    }
    for (const e of entries) {
      const p = join(root, rel, e.name);
      if (e.isDirectory()) { if (depth < 2 && !e.name.startsWith('.')) walk(root, rel ? `${rel}/${e.name}` : e.name, depth + 1); continue; }
      if (!e.isFile()) continue;
      const size = statSync(p).size;
      if (/\.(mlb|gguf)$/i.test(e.name)) add({ name: e.name, url: url(e.name), kind: e.name.toLowerCase().endsWith('.gguf') ? 'gguf' : 'mlb', size });
      else if (/\.bin$/i.test(e.name) && !/^tok/i.test(e.name) && size > 28) {
        const vocab = llama2cVocab(p);
        const tok = [`tok${vocab}.bin`, 'tokenizer.bin'].find((n) => names.includes(n));
        if (tok) add({ name: e.name, url: url(e.name), tokenizer: url(tok), kind: 'llama2c', size });
      }
    }
  };
  for (const d of modelDirs) walk(d, '', 0);
  return [...seen.values()].sort((a, b) => a.name.localeCompare(b.name));
}

const server = createServer((req, res) => {
  const url = new URL(req.url, 'http://localhost');
  const headers = { 'Cache-Control': 'no-store', 'Cross-Origin-Resource-Policy': 'same-origin' };
  if (coi) {
    headers['Cross-Origin-Opener-Policy'] = 'same-origin';
    headers['Cross-Origin-Embedder-Policy'] = 'require-corp';
  }
  if (counting && url.pathname === '/__requests') {
    res.writeHead(200, { ...headers, 'Content-Type': 'application/json' });
    res.end(JSON.stringify(Object.fromEntries(counts)));
    if (url.searchParams.get('reset')) counts.clear();
    return;
  }
  if (counting) counts.set(url.pathname, (counts.get(url.pathname) ?? 0) + 1);
  if (url.pathname === '/') {
    res.writeHead(302, { ...headers, Location: '/demo/' });
    res.end();
    return;
  }
  if (url.pathname === '/models/index.json') {
    res.writeHead(200, { ...headers, 'Content-Type': 'application/json' });
    res.end(JSON.stringify(listModels()));
    return;
  }
  const file = locate(url.pathname);
  if (!file) {
    res.writeHead(404, { ...headers, 'Content-Type': 'text/plain' });
    res.end(`not found: ${url.pathname}\n`);
    return;
  }
  const size = statSync(file).size;
  headers['Content-Type'] = TYPES[extname(file)] ?? 'application/octet-stream';
  headers['Content-Length'] = String(size);
  res.writeHead(200, headers);
  if (req.method === 'HEAD') { res.end(); return; }
  const kbps = Number(url.searchParams.get('throttle') || 0);
  const stream = createReadStream(file, { highWaterMark: kbps ? Math.max(1024, Math.floor(kbps * 1024 / 20)) : 65536 });
  if (!kbps) { stream.pipe(res); return; }
  // About 20 chunks a second.
  stream.on('data', (chunk) => {
    stream.pause();
    res.write(chunk);
    setTimeout(() => stream.resume(), 50);
  });
  stream.on('end', () => res.end());
  req.on('close', () => stream.destroy());
});
server.listen(port, '127.0.0.1', () => {
  console.log(`krafla demo: http://127.0.0.1:${port}/demo/ (${coi ? 'cross-origin isolated' : 'not isolated'}; models from ${modelDirs.join(', ')})`);
});
