// Hugging Face model folders (load({hf})): tinystories-656k-hf (../shared/models, SOURCES.md)
// served by a local HTTP server as it is and split into two shards with an index, read as picked
// Files, as an object of files and as a node path. The oracle is the native scalar build's
// ml_run on the same folder: the greedy text and token count must be the same. Missing files
// fail cleanly naming the file and the HTTP status; the engine's messages name the folder, not
// the staging path; the staged weights are dropped once the engine has read them; the cache
// keeps only what opened. node has no Cache Storage: an in-memory one stands in (as download.test.mjs).
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { after, before, beforeEach, describe, test } from 'node:test';
import { chooseBuild, detectFeatures, Krafla } from '../src/index.js';
import { Host } from '../src/host.js';
import { normalizeHf } from '../src/hf.js';
import { hfFolder as FOLDER, nativeGenerated, webDir } from './native.mjs';

const PROMPT = 'Once upon a time';
const N = 60;
const all = JSON.parse(readFileSync(join(webDir, 'dist', 'builds.json'), 'utf8')).builds;
const builds = process.env.KRAFLA_TEST_BUILDS ? all.filter((b) => process.env.KRAFLA_TEST_BUILDS.split(',').includes(b)) : all;
const runnable = (b) => { try { chooseBuild([b], detectFeatures(), { force: b }); return true; } catch { return false; } };

// The oracle: ml_run on the folder.
const native = nativeGenerated(FOLDER, PROMPT, N);

// --- the folder's files, and the same weights as two shards with an index -------------------
const files = Object.fromEntries(readdirSync(FOLDER).map((f) => [f, readFileSync(join(FOLDER, f))]));
const SHARDS = ['model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors'];

// safetensors: u64 header length, a JSON header (dtype, shape, data_offsets per tensor), the data.
function split(bytes) {
  const hlen = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + hlen).toString('utf8'));
  const data = bytes.subarray(8 + hlen);
  const names = Object.keys(header).filter((k) => k !== '__metadata__').sort();
  const half = Math.ceil(names.length / 2);
  const weightMap = {};
  const shards = [names.slice(0, half), names.slice(half)].map((group, i) => {
    const h = header.__metadata__ ? { __metadata__: header.__metadata__ } : {};
    const parts = [];
    let off = 0;
    for (const name of group) {
      const [a, b] = header[name].data_offsets;
      h[name] = { dtype: header[name].dtype, shape: header[name].shape, data_offsets: [off, off + b - a] };
      parts.push(data.subarray(a, b));
      off += b - a;
      weightMap[name] = SHARDS[i];
    }
    let json = JSON.stringify(h);
    json += ' '.repeat((8 - (json.length % 8)) % 8);
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(json.length));
    return Buffer.concat([len, Buffer.from(json), ...parts]);
  });
  assert.ok(names.length >= 4, 'the model has tensors to split');
  return { [SHARDS[0]]: shards[0], [SHARDS[1]]: shards[1],
    'model.safetensors.index.json': Buffer.from(JSON.stringify({ metadata: { total_size: data.length }, weight_map: weightMap })) };
}
const { 'model.safetensors': weights, ...small } = files;
const sharded = { ...small, ...split(weights) };
const deeper = JSON.parse(files['config.json']);
deeper.num_hidden_layers = 3; // the weights hold 2 layers: the engine refuses (format)

const FOLDERS = {
  one: files,
  one2: files,
  sharded,
  'no-tokenizer': Object.fromEntries(Object.entries(files).filter(([n]) => n !== 'tokenizer.json')),
  'missing-shard': Object.fromEntries(Object.entries(sharded).filter(([n]) => n !== SHARDS[1])),
  'bad-shape': { ...files, 'config.json': Buffer.from(JSON.stringify(deeper)) },
  // Indexes whose shard names would leave the folder, or that are not JSON.
  'evil-index': { ...small, 'model.safetensors.index.json': Buffer.from(JSON.stringify({ weight_map: { 'lm_head.weight': '../one/model.safetensors' } })) },
  'bad-index': { ...small, 'model.safetensors.index.json': Buffer.from('{"weight_map": ') },
};
const hits = new Map();
const server = createServer((req, res) => {
  const path = new URL(req.url, 'http://x').pathname;
  hits.set(path, (hits.get(path) ?? 0) + 1);
  const [, folder, name] = path.split('/');
  const body = FOLDERS[folder]?.[name];
  if (!body) {
    res.writeHead(404);
    res.end();
    return;
  }
  res.writeHead(200, { 'Content-Length': body.length });
  res.end(body);
});

// --- Cache Storage for the in-process engine (as download.test.mjs) --------------------------
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
};
const CACHE = 'krafla-hf-test';
const cachedKeys = () => [...(stores.get(CACHE)?.entries.keys() ?? [])].sort();

// Picked files as <input webkitdirectory> gives them: File objects with webkitRelativePath.
function picked(folder, names = Object.keys(folder)) {
  const file = (rel, bytes) => {
    const f = new File([bytes], rel.split('/').pop());
    Object.defineProperty(f, 'webkitRelativePath', { value: rel });
    return f;
  };
  // A config.json deeper in the folder (an onnx/ export, say) must not replace the top one.
  return [file('tinystories-656k-hf/onnx/config.json', Buffer.from('{"not": "this one"}')),
    ...names.map((n) => file(`tinystories-656k-hf/${n}`, folder[n]))];
}

async function greedy(k) {
  return k.complete(PROMPT, { temperature: 0, maxTokens: N });
}

let base;
const stopper = setTimeout(() => { server.closeAllConnections(); server.close(); }, 300_000);
stopper.unref();
before(async () => {
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${server.address().port}`;
});
after(() => {
  clearTimeout(stopper);
  server.closeAllConnections();
  server.close();
});

test('the oracle: ml_run on the folder generates text', () => {
  assert.equal(native.generated, N);
  assert.ok(native.text.length > 100, native.text);
});

for (const build of builds.filter(runnable)) {
  test(`build ${build}: a folder URL gives native ml_run's greedy text`, async () => {
    const k = await Krafla.create({ build, threads: build.endsWith('_mt') ? 2 : undefined });
    try {
      const phases = new Set();
      const fileNames = new Set();
      const info = await k.load({ hf: `${base}/one/` }, { onProgress: (p) => { phases.add(p.phase); if (p.file) fileNames.add(p.file); } });
      assert.deepEqual([...phases], ['download', 'convert', 'load']);
      assert.deepEqual([...fileNames].sort(), ['config.json', 'generation_config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json']);
      assert.equal(info.tokenizerKind, 'hf');
      assert.deepEqual([info.dim, info.nLayers, info.nHeads, info.nKvHeads, info.vocabSize, info.maxSeq], [128, 2, 8, 4, 2048, 512]);
      assert.equal(info.fromCache, false);
      // SOURCES.md's encoding of the prompt (the tokenizer's post-processor adds <|start_story|>).
      assert.deepEqual(await k.tokenize(PROMPT, { addSpecial: true }), [1, 80, 147, 201, 282, 57]);
      const r = await greedy(k);
      assert.equal(r.text, native.text);
      assert.equal(r.stats.generatedTokens, native.generated);
    } finally {
      k.terminate();
    }
  });
}

describe('Hugging Face folders in a worker', () => {
  let k;
  before(async () => { k = await Krafla.create(); });
  after(() => k?.terminate());
  beforeEach(() => hits.clear());

  test('a sharded folder (model.safetensors.index.json and two shards): the same text', async () => {
    const fileNames = new Set();
    await k.load({ hf: `${base}/sharded` }, { onProgress: (p) => p.file && fileNames.add(p.file) });
    assert.ok(SHARDS.every((s) => fileNames.has(s)) && fileNames.has('model.safetensors.index.json'), [...fileNames].join());
    assert.equal(hits.get('/sharded/model.safetensors'), 1, 'model.safetensors is asked for first (HTTP 404 here)');
    assert.equal((await greedy(k)).text, native.text);
  });

  test('picked files (<input webkitdirectory>): the same text', async () => {
    const phases = new Set();
    await k.load({ hf: picked(files) }, { onProgress: (p) => phases.add(p.phase) });
    assert.deepEqual([...phases], ['read', 'convert', 'load']);
    assert.equal((await greedy(k)).text, native.text);
    await k.load({ hf: picked(sharded) });
    assert.equal((await greedy(k)).text, native.text);
  });

  test('an object of files (bytes, a Blob, URLs) and a node path: the same text', async () => {
    await k.load({ hf: {
      'config.json': new Uint8Array(files['config.json']),
      'tokenizer.json': new Blob([files['tokenizer.json']]),
      'tokenizer_config.json': new URL(`${base}/one/tokenizer_config.json`),
      'model.safetensors': `${base}/one/model.safetensors`,
    } });
    assert.equal((await greedy(k)).text, native.text);
    await k.load({ hf: FOLDER });
    assert.equal((await greedy(k)).text, native.text);
  });

  test('a missing tokenizer.json fails before the weights download, naming the file and HTTP 404 (kind io)', async () => {
    await k.load({ hf: `${base}/one/` });
    const url = `${base}/no-tokenizer/tokenizer.json`;
    await assert.rejects(k.load({ hf: `${base}/no-tokenizer/` }), (e) => {
      assert.equal(e.name, 'KraflaError');
      assert.equal(e.kind, 'io');
      assert.ok(e.message.includes(url) && e.message.includes('HTTP 404'), e.message);
      return true;
    });
    assert.equal(hits.get('/no-tokenizer/model.safetensors'), undefined, 'the weights were not downloaded');
    assert.equal(k.model?.dim, 128, 'the model loaded before stays loaded');
    assert.equal((await greedy(k)).text, native.text);
  });

  test('a missing shard fails naming it and HTTP 404 (kind io); picked files without tokenizer.json fail (kind format)', async () => {
    await assert.rejects(k.load({ hf: `${base}/missing-shard/` }), (e) => e.kind === 'io' &&
      e.message.includes(`${base}/missing-shard/${SHARDS[1]}`) && e.message.includes('HTTP 404'));
    const noTok = Object.keys(files).filter((n) => n !== 'tokenizer.json');
    await assert.rejects(k.load({ hf: picked(files, noTok) }), (e) => e.kind === 'format' &&
      /tinystories-656k-hf: tokenizer\.json is missing/.test(e.message));
    await assert.rejects(k.load({ hf: picked(sharded, Object.keys(sharded).filter((n) => n !== SHARDS[0])) }),
      (e) => e.kind === 'format' && e.message.includes(`${SHARDS[0]} is missing`));
    await assert.rejects(k.load({ hf: `${base}/nothing/` }), (e) => e.kind === 'io' && e.message.includes(`${base}/nothing/config.json`) &&
      e.message.includes('HTTP 404'));
  });

  test('an index whose shard names leave the folder, or that is not JSON, fails (kind format) before any shard is fetched', async () => {
    await assert.rejects(k.load({ hf: `${base}/evil-index/` }), (e) => e.kind === 'format' &&
      e.message.includes(`${base}/evil-index/model.safetensors.index.json`) && e.message.includes('"../one/model.safetensors"'));
    assert.equal(hits.get('/one/model.safetensors'), undefined);
    await assert.rejects(k.load({ hf: `${base}/bad-index/` }), (e) => e.kind === 'format' && /not valid JSON/.test(e.message));
  });

  test("the engine's refusal names the folder's URL, not the staging folder (kind format)", async () => {
    await assert.rejects(k.load({ hf: `${base}/bad-shape/` }), (e) => {
      assert.equal(e.kind, 'format');
      assert.ok(e.message.startsWith(`${base}/bad-shape`), e.message);
      assert.match(e.message, /layers\.2/);
      assert.ok(!e.message.includes('/krafla-hf-'), e.message);
      return true;
    });
    assert.equal(k.model, null, 'the old model was freed before the engine opened the new one');
  });

  test('bad arguments: a tokenizer option, an hf of the wrong kind', async () => {
    await assert.rejects(k.load({ hf: `${base}/one/` }, { tokenizer: `${base}/one/tokenizer.json` }), (e) => e.kind === 'arg');
    await assert.rejects(k.load({ hf: 42 }), (e) => e.kind === 'arg');
  });
});

test('repo ids become huggingface.co folder URLs; relative folder URLs resolve against the page', () => {
  assert.equal(normalizeHf({ hf: 'HuggingFaceTB/SmolLM2-135M-Instruct' }).hf, 'https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct/resolve/main/');
  assert.equal(normalizeHf({ hf: 'org/m', revision: 'refs/pr/1' }).hf, 'https://huggingface.co/org/m/resolve/refs%2Fpr%2F1/');
  assert.equal(normalizeHf({ hf: '/models/x/' }, 'http://h/demo/index.html').hf, 'http://h/models/x/');
  assert.equal(normalizeHf({ hf: './x' }).hf, './x');
});

describe('staging and the cache (in-process)', () => {
  let k;
  before(async () => { k = await Krafla.create({ worker: false, threads: false }); });
  after(() => k?.terminate());
  beforeEach(() => { stores.clear(); hits.clear(); });

  test("the staged weights are dropped once the engine has read them, and the staging folder is removed", async () => {
    const host = new Host(() => {});
    await host.op_init(0, { distUrl: new URL('../dist/', import.meta.url).href, threads: false });
    const { FS } = host.mod;
    const ccall = host.mod.ccall;
    let sizes = null;
    host.mod.ccall = (name, ...rest) => {
      const r = ccall(name, ...rest);
      if (name === 'krafla_open_path') {
        const dir = rest[2][0];
        sizes = Object.fromEntries(FS.readdir(dir).filter((f) => !f.startsWith('.')).map((f) => [f, FS.stat(`${dir}/${f}`).size]));
      }
      return r;
    };
    await host.op_load(0, { source: normalizeHf({ hf: `${base}/sharded/` }) });
    assert.equal(sizes['config.json'], files['config.json'].length);
    assert.deepEqual([sizes[SHARDS[0]], sizes[SHARDS[1]]], [0, 0], 'each shard was dropped after the engine read it');
    assert.deepEqual(FS.readdir('/').filter((d) => d.startsWith('krafla-hf')), []);
    host.unload();
  });

  test('each file is cached under its URL once the folder opened; the next load reads the cache', async () => {
    const info = await k.load({ hf: `${base}/one/` }, { cache: CACHE });
    assert.equal(info.fromCache, false);
    const urls = Object.keys(files).filter((n) => n !== 'special_tokens_map.json' && n !== 'SOURCES.md').map((n) => `${base}/one/${n}`).sort();
    assert.deepEqual(cachedKeys(), urls);
    hits.clear();
    const again = await k.load({ hf: `${base}/one/` }, { cache: CACHE });
    assert.equal(again.fromCache, true);
    assert.equal(hits.size, 0, 'nothing was downloaded');
    assert.equal((await greedy(k)).text, native.text);
  });

  test('a folder the engine refuses is not cached; a failed download leaves nothing cached', async () => {
    await assert.rejects(k.load({ hf: `${base}/bad-shape/` }, { cache: CACHE }), (e) => e.kind === 'format');
    assert.deepEqual(cachedKeys(), []);
    await assert.rejects(k.load({ hf: `${base}/missing-shard/` }, { cache: CACHE }), (e) => e.kind === 'io');
    assert.deepEqual(cachedKeys(), []);
  });

  test("a cached file the engine refuses is deleted with the folder's other cached files; the next load downloads them", async () => {
    await k.load({ hf: `${base}/one2/` }, { cache: CACHE });
    const c = await caches.open(CACHE);
    const bad = Buffer.from(JSON.stringify(deeper));
    await c.put(`${base}/one2/config.json`, new Response(bad, { headers: { 'content-length': String(bad.length) } }));
    await assert.rejects(k.load({ hf: `${base}/one2/` }, { cache: CACHE }), (e) => e.kind === 'format' && /cached copies .* were removed/.test(e.message));
    assert.deepEqual(cachedKeys(), []);
    hits.clear();
    const info = await k.load({ hf: `${base}/one2/` }, { cache: CACHE });
    assert.equal(info.fromCache, false);
    assert.equal(hits.get('/one2/model.safetensors'), 1);
    assert.equal((await greedy(k)).text, native.text);
  });
});
