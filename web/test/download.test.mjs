// Downloads that go wrong, and the model cache (issue 13): a body shorter or longer than its
// Content-Length fails with the URL and both byte counts; only a model the engine has opened is
// cached; a cached entry that does not open is deleted. A local HTTP server serves the cases, and
// node has no Cache Storage, so a small in-memory one stands in for it (e2e/ runs Chromium's).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { after, before, beforeEach, describe, test } from 'node:test';
import { Krafla } from '../src/index.js';
import { nativeMlb } from './native.mjs';

// Cache Storage as the package uses it: open, match, put, delete; entries are kept as bytes and headers.
class MemoryCache {
  constructor() { this.entries = new Map(); }
  async match(key) {
    const e = this.entries.get(String(key));
    return e ? new Response(e.bytes, { headers: e.headers }) : undefined;
  }
  async put(key, res) { this.entries.set(String(key), { bytes: new Uint8Array(await res.arrayBuffer()), headers: [...res.headers] }); }
  async delete(key) { return this.entries.delete(String(key)); }
}
const stores = new Map();
globalThis.caches = {
  async open(name) {
    if (!stores.has(name)) stores.set(name, new MemoryCache());
    return stores.get(name);
  },
  async delete(name) { return stores.delete(name); },
};
const CACHE = 'krafla-test';
const cached = (url) => stores.get(CACHE)?.entries.get(url);

const model = readFileSync(nativeMlb());
const dirOffset = Number(model.readBigUInt64LE(152));
// The first tensor's type set to 9: the header is fine, the engine refuses the directory.
const corrupt = Buffer.from(model);
corrupt.writeUInt32LE(9, dirOffset + 48);
const CUT = 100_000;

const hits = new Map();
const server = createServer((req, res) => {
  const path = new URL(req.url, 'http://x').pathname;
  hits.set(path, (hits.get(path) ?? 0) + 1);
  if (path === '/good.mlb' || path === '/good2.mlb') {
    res.writeHead(200, { 'Content-Length': model.length });
    res.end(model);
  } else if (path === '/cut-short.mlb') { // announces the whole model, sends CUT bytes, closes
    res.writeHead(200, { 'Content-Length': model.length });
    res.write(model.subarray(0, CUT), () => setTimeout(() => res.destroy(), 20));
  } else if (path === '/short-length.mlb') { // a Content-Length 1000 bytes short: the client reads that much
    res.writeHead(200, { 'Content-Length': model.length - 1000 });
    res.end(model.subarray(0, model.length - 1000));
  } else if (path === '/corrupt.mlb') {
    res.writeHead(200, { 'Content-Length': corrupt.length });
    res.end(corrupt);
  } else {
    res.writeHead(404);
    res.end();
  }
});

describe('downloads and the model cache', () => {
  let k, base;
  // The server stops by itself if the tests hang.
  const stopper = setTimeout(() => { server.closeAllConnections(); server.close(); }, 120_000);
  stopper.unref();
  before(async () => {
    await new Promise((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${server.address().port}`;
    k = await Krafla.create({ worker: false, threads: false });
  });
  after(() => {
    k?.terminate();
    clearTimeout(stopper);
    server.closeAllConnections();
    server.close();
  });
  beforeEach(() => { stores.clear(); hits.clear(); });

  test('a download cut short fails with the URL and both byte counts (kind io) and is not cached', async () => {
    const url = `${base}/cut-short.mlb`;
    await assert.rejects(k.load(url, { cache: CACHE }), (e) => {
      assert.equal(e.name, 'KraflaError');
      assert.equal(e.kind, 'io');
      assert.ok(e.message.includes(url), e.message);
      assert.match(e.message, new RegExp(`expected ${model.length} bytes.*received ${CUT}`));
      return true;
    });
    assert.equal(cached(url), undefined);
  });

  test('a download longer than its Content-Length fails with both byte counts and is not cached', async () => {
    // HTTP clients stop reading at the Content-Length, so the longer body comes from a fetch that
    // lies, as a service worker or a proxy's Response could.
    const url = `${base}/good.mlb`;
    const realFetch = globalThis.fetch;
    globalThis.fetch = async (u, o) => (String(u) === url
      ? new Response(model, { headers: { 'content-length': String(model.length - 1000) } }) : realFetch(u, o));
    try {
      await assert.rejects(k.load(url, { cache: CACHE }), (e) => e.kind === 'io' && e.message.includes(url) &&
        new RegExp(`expected ${model.length - 1000} bytes.*received ${model.length}`).test(e.message));
    } finally {
      globalThis.fetch = realFetch;
    }
    assert.equal(cached(url), undefined);
  });

  test('a body that matches a short Content-Length is refused by the engine and not cached', async () => {
    const url = `${base}/short-length.mlb`;
    await assert.rejects(k.load(url, { cache: CACHE }), (e) => e.kind === 'format' && /file_size/.test(e.message));
    assert.equal(cached(url), undefined);
  });

  test('corrupt bytes of the right length are refused by the engine and not cached', async () => {
    const url = `${base}/corrupt.mlb`;
    await assert.rejects(k.load(url, { cache: CACHE }), (e) => e.kind === 'format' && /unknown type 9/.test(e.message));
    assert.equal(cached(url), undefined);
  });

  test('a model is cached once it has opened, and the next load reads the cache', async () => {
    const url = `${base}/good.mlb`;
    assert.equal((await k.load(url, { cache: CACHE })).fromCache, false);
    assert.equal(cached(url).bytes.length, model.length);
    assert.equal((await k.load(url, { cache: CACHE })).fromCache, true);
    assert.equal(hits.get('/good.mlb'), 1);
  });

  test('a cached entry that does not open is deleted, and the next load downloads again', async () => {
    const url = `${base}/good2.mlb`;
    await (await caches.open(CACHE)).put(url, new Response(corrupt, { headers: { 'content-length': String(corrupt.length) } }));
    await assert.rejects(k.load(url, { cache: CACHE }), (e) => e.kind === 'format' && /unknown type 9/.test(e.message));
    assert.equal(cached(url), undefined, 'the corrupt entry is deleted');
    const info = await k.load(url, { cache: CACHE });
    assert.equal(info.fromCache, false);
    assert.equal(hits.get('/good2.mlb'), 1);
    assert.equal(cached(url).bytes.length, model.length);
  });

  test('a cached entry shorter or longer than its Content-Length fails with both counts and is deleted', async () => {
    const url = `${base}/good.mlb`;
    for (const [bytes, announced] of [[model.subarray(0, CUT), model.length], [model, model.length - 1000]]) {
      await (await caches.open(CACHE)).put(url, new Response(bytes, { headers: { 'content-length': String(announced) } }));
      await assert.rejects(k.load(url, { cache: CACHE }), (e) => e.kind === 'io' && e.message.includes(url) &&
        new RegExp(`expected ${announced} bytes.*received ${bytes.length}`).test(e.message));
      assert.equal(cached(url), undefined);
    }
    assert.equal((await k.load(url, { cache: CACHE })).fromCache, false);
  });

  test('a load that fails before the engine opens it keeps the model loaded before (issue 17)', async () => {
    await k.load(`${base}/good.mlb`);
    const before = await k.complete('Once upon a time', { temperature: 0, maxTokens: 20 });
    await assert.rejects(k.load(`${base}/cut-short.mlb`), (e) => e.kind === 'io');
    await assert.rejects(k.load(`${base}/missing.mlb`), /HTTP 404/);
    assert.equal(k.model.dim, 64);
    assert.equal((await k.complete('Once upon a time', { temperature: 0, maxTokens: 20 })).text, before.text);
    // The engine's refusal comes after the old model was freed (it is freed before the new one
    // enters the wasm heap): then no model is loaded.
    await assert.rejects(k.load(`${base}/corrupt.mlb`), /unknown type 9/);
    assert.equal(k.model, null);
    await assert.rejects(k.tokenize('x'), /no model is loaded/);
  });
});
