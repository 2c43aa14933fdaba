// Krafla.cache (issue 17): the model cache a web app manages. Node has no Cache Storage (and no
// OPFS): first what Krafla.cache does without it, then its Cache Storage part over a small
// in-memory Cache Storage (e2e/cache.spec.mjs runs Chromium's, and OPFS for large files): list,
// has, delete, clear, size, what load() stores, and loads by URL that work offline from the cache.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Krafla } from '../src/index.js';
import { checkpoint, hfFolder, nativeGreedy, nativeMlb, tokenizer } from './native.mjs';

const PROMPT = 'Once upon a time';

test('without Cache Storage (node): nothing is cached, and Krafla.cache says so', async () => {
  assert.equal(typeof globalThis.caches, 'undefined');
  assert.equal(Krafla.cache.supported, false);
  assert.equal(Krafla.cache.opfs, false);
  assert.deepEqual(await Krafla.cache.list(), []);
  assert.equal(await Krafla.cache.has('http://example.org/m.mlb'), false);
  assert.equal(await Krafla.cache.delete('http://example.org/m.mlb'), false);
  assert.equal(await Krafla.cache.clear(), 0);
  assert.equal(await Krafla.cache.size(), 0);
  await assert.rejects(Krafla.cache.has(42), (e) => e.kind === 'arg' && /a URL/.test(e.message));
});

// Cache Storage as the package uses it: open, match, put, delete, keys.
class MemoryCache {
  constructor() { this.entries = new Map(); }
  async match(key) {
    const e = this.entries.get(String(key));
    return e ? new Response(e.bytes.length ? e.bytes : null, { headers: e.headers }) : undefined;
  }
  async put(key, res) { this.entries.set(String(key), { bytes: new Uint8Array(await res.arrayBuffer()), headers: [...res.headers] }); }
  async delete(key) { return this.entries.delete(String(key)); }
  async keys() { return [...this.entries.keys()].map((url) => ({ url })); }
}

const model = readFileSync(nativeMlb());
const ckpt = readFileSync(checkpoint);
const tok = readFileSync(tokenizer);
const hfFiles = ['config.json', 'generation_config.json', 'tokenizer.json', 'tokenizer_config.json', 'model.safetensors'];
let online = true;
const hits = new Map();
const server = createServer((req, res) => {
  const path = new URL(req.url, 'http://x').pathname;
  hits.set(path, (hits.get(path) ?? 0) + 1);
  if (!online) { res.destroy(); return; } // the network is down
  const send = (b) => { res.writeHead(200, { 'Content-Length': b.length }); res.end(b); };
  const hf = path.match(/^\/(hf|hf-nogen)\/(.+)$/);
  if (path === '/m.mlb') send(model);
  else if (path === '/cut.mlb') { res.writeHead(200, { 'Content-Length': model.length }); res.write(model.subarray(0, 5000), () => res.destroy()); }
  else if (path === '/stories260K.bin') send(ckpt);
  else if (path === '/tok512.bin') send(tok);
  else if (hf && hfFiles.includes(hf[2]) && !(hf[1] === 'hf-nogen' && hf[2] === 'generation_config.json')) send(readFileSync(join(hfFolder, hf[2])));
  else { res.writeHead(404); res.end(); }
});

describe('with Cache Storage', () => {
  let k, base;
  const stopper = setTimeout(() => { server.closeAllConnections(); server.close(); }, 120_000);
  stopper.unref();
  before(async () => {
    const stores = new Map();
    globalThis.caches = {
      async open(name) { if (!stores.has(name)) stores.set(name, new MemoryCache()); return stores.get(name); },
      async delete(name) { return stores.delete(name); },
    };
    await new Promise((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${server.address().port}`;
    k = await Krafla.create({ worker: false, threads: false }); // in-process: this Cache Storage is the engine's
  });
  after(() => {
    k?.terminate();
    clearTimeout(stopper);
    server.closeAllConnections();
    server.close();
  });

  test('load(url, {cache: true}) stores an opened model in krafla-models; list, has, size, delete', async () => {
    const url = `${base}/m.mlb`;
    assert.equal(Krafla.cache.supported, true);
    assert.equal((await k.load(url, { cache: true })).fromCache, false);
    const list = await Krafla.cache.list();
    assert.equal(list.length, 1);
    assert.equal(list[0].url, url);
    assert.equal(list[0].size, model.length);
    assert.equal(list[0].storage, 'cache'); // node has no OPFS
    assert.ok(Date.now() - Date.parse(list[0].cachedAt) < 60_000);
    assert.equal(await Krafla.cache.has(url), true);
    assert.equal(await Krafla.cache.has(new URL(url)), true);
    assert.equal(await Krafla.cache.has(`${base}/other.mlb`), false);
    assert.equal(await Krafla.cache.size(), model.length);
    assert.equal(await Krafla.cache.delete(url), true);
    assert.equal(await Krafla.cache.delete(url), false);
    assert.deepEqual(await Krafla.cache.list(), []);
    // A named cache is separate.
    await k.load(url, { cache: 'mine' });
    assert.deepEqual(await Krafla.cache.list(), []);
    assert.equal((await Krafla.cache.list('mine'))[0].url, url);
    assert.equal(await Krafla.cache.clear('mine'), 1);
    assert.equal(await Krafla.cache.size('mine'), 0);
  });

  test('a truncated or invalid download is never kept', async () => {
    await assert.rejects(k.load(`${base}/cut.mlb`, { cache: true }), (e) => e.kind === 'io' && e.message.includes(`${base}/cut.mlb`) &&
      new RegExp(`expected ${model.length} bytes, received 5000`).test(e.message));
    await assert.rejects(k.load(`${base}/missing.mlb`, { cache: true }), (e) => e.kind === 'io' && /HTTP 404/.test(e.message));
    await assert.rejects(k.load(`${base}/tok512.bin`, { cache: true }), (e) => e.kind === 'format');
    assert.deepEqual(await Krafla.cache.list(), []);
  });

  test('a llama2.c conversion is listed with its source; has and delete by the checkpoint URL', async () => {
    const url = `${base}/stories260K.bin`;
    await k.load(url, { tokenizer: `${base}/tok512.bin`, cache: true });
    const [e] = await Krafla.cache.list();
    assert.equal(e.source, url);
    assert.match(e.url, /\?krafla-mlb=q8&tokenizer=/);
    assert.equal(await Krafla.cache.has(url), true);
    assert.equal(await Krafla.cache.delete(url), true);
    assert.equal(await Krafla.cache.clear(), 0);
  });

  test('a cached model and a cached Hugging Face folder load offline', async () => {
    const url = `${base}/m.mlb`;
    const folder = `${base}/hf-nogen/`; // generation_config.json answers 404: recorded as absent
    await k.load(url, { cache: true });
    await k.load({ hf: folder }, { cache: true });
    const list = await Krafla.cache.list();
    assert.deepEqual(list.map((e) => e.url).sort(), [url, ...['config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json'].map((f) => folder + f)].sort());
    assert.equal(await Krafla.cache.has(folder), true);
    online = false;
    try {
      hits.clear();
      assert.equal((await k.load(url, { cache: true })).fromCache, true);
      const r = await k.complete(PROMPT, { temperature: 0, maxTokens: 30 });
      assert.equal((await k.detokenize(await k.tokenize(PROMPT, { addBos: true }))) + r.text, nativeGreedy(PROMPT, 30));
      assert.equal((await k.load({ hf: folder }, { cache: true })).fromCache, true);
      assert.equal(hits.size, 0, `no request while offline: ${[...hits.keys()]}`);
      // Not cached: the error names the URL (kind io).
      await assert.rejects(k.load(`${base}/hf/`, { cache: true }), (e) => e.kind === 'io' && e.message.includes(`${base}/hf/`));
    } finally {
      online = true;
    }
    assert.equal(await Krafla.cache.delete(folder), true);
    assert.deepEqual((await Krafla.cache.list()).map((e) => e.url), [url]);
    assert.equal(await Krafla.cache.clear(), 1);
  });
});
