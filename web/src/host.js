// The engine side of the package: runs where the wasm module lives (a Web Worker, a node
// worker_thread, or in-process) and answers the client's calls (client.js) by message.
//
// Messages in:  {type: 'call', id, method, args}   {type: 'abort', id}   {type: 'credit', id, n}
// Messages out: {type: 'result', id, value}  {type: 'error', id, error: {message, kind}}
//               {type: 'event', id, event}   (progress, text pieces)
// Calls run one at a time in arrival order; 'abort' is handled at once: the generation loop
// returns to the event loop after every token, sees the flag and stops (the engine stays ready).
// 'credit' lets a generation send n more text events (flow control: generate.js waits when its
// window is spent, so that it never runs far ahead of the consumer).
import { chooseBuild, detectFeatures } from './detect.js';
import { checkFits, MLB_HEADER_BYTES, parseHeader } from './header.js';
import { cacheDelete, cachePut } from './cache.js';
import { isBadBytes, readSource, sourceName } from './source.js';
import { KraflaError } from './errors.js';
import { bench, generate } from './generate.js';
import { isHfSource, loadHf } from './hf.js';

const isNode = typeof process === 'object' && !!process.versions?.node && typeof window === 'undefined';

// Returns to the event loop (so that an abort message can arrive) at the cost of microseconds:
// setImmediate in node, a MessageChannel round trip in browsers (setTimeout is clamped to 4 ms).
function makeYield() {
  if (typeof setImmediate === 'function') return () => new Promise((r) => setImmediate(r));
  const ch = new MessageChannel();
  const waiting = [];
  ch.port1.onmessage = () => waiting.shift()?.();
  return () => new Promise((r) => { waiting.push(r); ch.port2.postMessage(0); });
}

// Asks the browser (or node) for a wasm memory of `need` bytes and lets it go: a page whose
// browser caps wasm memory below 4 GiB (mobile browsers, low-memory devices) refuses here, before
// the download, rather than with an allocation failure after it.
function probeMemory(need, name) {
  if (need < 256 * 2 ** 20) return;
  const pages = Math.min(65536, Math.ceil(need / 65536));
  try {
    new WebAssembly.Memory({ initial: pages, maximum: pages });
  } catch (e) {
    throw new KraflaError(`${name}: this model cannot fit: it needs about ${(need / 2 ** 30).toFixed(2)} GiB of wasm memory, ` +
      `and this browser refused to allocate that much (${e.message})`, 'nomem');
  }
}

async function listBuilds(distUrl) {
  const url = new URL('builds.json', distUrl);
  let text;
  if (url.protocol === 'file:') {
    const { readFile } = await import('node:fs/promises');
    text = await readFile(url, 'utf8').catch(() => null);
  } else {
    const r = await fetch(url).catch(() => null);
    text = r && r.ok ? await r.text() : null;
  }
  if (text == null) throw new KraflaError(`krafla: no wasm builds at ${distUrl} (${url} is missing: run scripts/copy-builds.mjs)`, 'setup');
  return JSON.parse(text).builds;
}

const STATUS_KINDS = ['ok', 'io', 'format', 'shape', 'nomem', 'isa', 'arg'];

async function fetchText(url) {
  const r = await fetch(url).catch((e) => { throw new KraflaError(`krafla: fetching ${url}: ${e.message}`, 'setup'); });
  if (!r.ok) throw new KraflaError(`krafla: fetching ${url}: HTTP ${r.status}`, 'setup');
  return r.text();
}

// A threaded build's pthreads are web workers that each load krafla.worker.js, which then imports
// the glue krafla.mjs: left to Emscripten, the glue is fetched once per thread and the worker
// script once per pthread. Fetched here once each, they are handed out as blob: URLs (the glue's
// mainScriptUrlOrBlob, the worker's locateFile). A blob: URL is no base for relative ones: the
// glue's import.meta.url (where it finds krafla.wasm, also in each pthread) becomes its real URL.
async function importShared(modUrl, opts) {
  const blobUrl = (text) => URL.createObjectURL(new Blob([text], { type: 'text/javascript' }));
  const [glue, pthread] = await Promise.all([fetchText(modUrl), fetchText(new URL('krafla.worker.js', modUrl))]);
  const glueUrl = blobUrl(glue.replaceAll('import.meta.url', JSON.stringify(modUrl.href)));
  const workerUrl = blobUrl(pthread);
  opts.mainScriptUrlOrBlob = glueUrl;
  opts.locateFile = (path) => (path.endsWith('.worker.js') ? workerUrl : new URL(path, modUrl).href);
  return (await import(glueUrl)).default;
}

async function importBuild(distUrl, name, poolSize, threaded) {
  const modUrl = new URL(`${name}/krafla.mjs`, distUrl);
  const opts = { pthreadPoolSize: poolSize };
  const web = modUrl.protocol === 'http:' || modUrl.protocol === 'https:';
  const factory = threaded && web && typeof Blob === 'function' && typeof URL.createObjectURL === 'function'
    ? await importShared(modUrl, opts) : (await import(modUrl.href)).default;
  if (modUrl.protocol === 'file:') {
    // 3.1.6's node glue cannot fetch its .wasm from an ES module (../shared/TOOLCHAIN.md, section 1).
    const { readFile } = await import('node:fs/promises');
    opts.wasmBinary = await readFile(new URL(`${name}/krafla.wasm`, distUrl));
  }
  opts.print = () => {};
  opts.printErr = (s) => { if (globalThis.KRAFLA_DEBUG) console.error(s); };
  return factory(opts);
}

export class Host {
  constructor(post) {
    this.post = post;
    this.mod = null;
    this.session = 0;
    this.queue = Promise.resolve();
    this.aborted = new Set();
    this.flow = new Map(); // generation id -> {credit, wake}: its events left to send, and its waiter
    this.yieldNow = makeYield();
  }

  handle(msg) {
    if (msg.type === 'abort') {
      this.aborted.add(msg.id);
      this.flow.get(msg.id)?.wake?.();
      return;
    }
    if (msg.type === 'credit') {
      const f = this.flow.get(msg.id);
      if (f) { f.credit += msg.n; f.wake?.(); }
      return;
    }
    if (msg.type !== 'call') return;
    const { id, method, args } = msg;
    this.queue = this.queue.then(async () => {
      try {
        if (typeof this[`op_${method}`] !== 'function') throw new KraflaError(`krafla: unknown call ${method}`);
        const value = await this[`op_${method}`](id, args ?? {});
        this.post({ type: 'result', id, value });
      } catch (e) {
        this.post({ type: 'error', id, error: { message: e?.message ?? String(e), kind: e?.kind ?? 'error' } });
      } finally {
        this.aborted.delete(id);
      }
    });
  }

  // --- the wasm module -------------------------------------------------------------------------

  heap() {
    const m = this.mod;
    const buf = m.wasmMemory ? m.wasmMemory.buffer : m.HEAPU8.buffer;
    if (m.HEAPU8.buffer !== buf) return new Uint8Array(buf);
    return m.HEAPU8;
  }

  // The engine's last error as a KraflaError: "what: message" (message rewritten by `edit`, if given).
  fail(what, edit) {
    const m = this.mod;
    const msg = m.UTF8ToString(m._krafla_last_error());
    return new KraflaError(edit ? edit(msg) : `${what}: ${msg}`, STATUS_KINDS[m._krafla_last_status()] ?? 'error');
  }

  i32(ptr, n) {
    return new Int32Array(this.heap().buffer, ptr, n);
  }

  // Copies bytes into a fresh krafla_alloc buffer; the caller owns it.
  toHeap(bytes) {
    const p = this.mod._krafla_alloc(bytes.length);
    if (!p) throw this.fail('krafla: loading the model');
    this.heap().set(bytes, p);
    return p;
  }

  withString(text, fn) {
    const bytes = new TextEncoder().encode(text);
    const p = this.mod._malloc(bytes.length + 1);
    try {
      const h = this.heap();
      h.set(bytes, p);
      h[p + bytes.length] = 0;
      return fn(p, bytes.length);
    } finally {
      this.mod._free(p);
    }
  }

  requireSession() {
    if (!this.session) throw new KraflaError('krafla: no model is loaded (call load first)', 'state');
    return this.session;
  }

  // --- calls -----------------------------------------------------------------------------------

  async op_init(_id, { distUrl, builds, threads, build: force }) {
    const features = detectFeatures();
    if (isNode && !features.hardwareConcurrency) {
      const os = await import('node:os');
      features.hardwareConcurrency = os.availableParallelism?.() ?? os.cpus().length;
    }
    const available = builds ?? (await listBuilds(distUrl));
    const choice = chooseBuild(available, features, { threads, force });
    const cores = features.hardwareConcurrency || 1;
    // Threads: the caller plus a pthread pool of n - 1 workers started with the module.
    this.threads = choice.threaded ? (typeof threads === 'number' ? threads : Math.max(1, Math.min(cores, 4))) : 1;
    this.mod = await importBuild(distUrl, choice.name, Math.max(1, this.threads - 1), choice.threaded);
    const m = this.mod;
    this.build = {
      ...choice,
      kernels: m.UTF8ToString(m._krafla_build_isa()),
      packG: m._krafla_build_pack_g(),
      nThreads: this.threads,
      features,
    };
    return this.build;
  }

  // Loads a model. A URL's bytes go into the cache (`cache`, a Cache Storage name) only once the
  // engine has opened them, and a cached copy the engine refuses is deleted, so that a damaged
  // download is never served again. The model loaded before stays loaded until the new one's
  // bytes have arrived and passed the header checks; it is freed before they enter the wasm heap.
  // A Hugging Face folder ({hf}) goes to hf.js.
  async op_load(id, { source, tokenizer, ctx = 0, cache = false, maxMemoryBytes }) {
    if (!this.mod) throw new KraflaError('krafla: the engine is not initialised', 'state');
    if (isHfSource(source)) return loadHf(this, id, { source, tokenizer, ctx, cache });
    const progress = (event) => this.post({ type: 'event', id, event: { type: 'progress', ...event } });
    const name = sourceName(source);
    const limits = { limit: maxMemoryBytes ?? Infinity, packed: this.build.packG > 0, ctx };
    let header = null;
    const check = (head) => {
      try {
        header = parseHeader(head, name);
      } catch (e) {
        throw new KraflaError(e.message, 'format');
      }
      if (header.kind === 'llama2c' && !tokenizer) {
        throw new KraflaError(`${name}: a llama2.c checkpoint needs its tokenizer.bin: pass {tokenizer: ...} to load()`, 'arg');
      }
      const need = checkFits(header, name, limits);
      if (need) probeMemory(need, name);
    };
    const url = cache && typeof source === 'string' ? source : null;
    const convertedKey = url && tokenizer && typeof tokenizer === 'string'
      ? `${url}${url.includes('?') ? '&' : '?'}krafla-mlb=q8&tokenizer=${encodeURIComponent(tokenizer)}` : null;

    let bytes = null;
    let fromCache = false;
    let cacheKey = null; // where these bytes are cached (fromCache) or are to be cached once opened
    if (convertedKey) {
      const hit = await readSource(convertedKey, { cache, cacheOnly: true, check, progress, phase: 'download' });
      if (hit) ({ bytes, fromCache } = hit);
      cacheKey = convertedKey;
    }
    if (!bytes) {
      const got = await readSource(source, { cache, check, progress, phase: 'download', headBytes: MLB_HEADER_BYTES });
      bytes = got.bytes;
      fromCache = got.fromCache;
      // A llama2.c checkpoint is cached once converted (convertedKey), not as downloaded.
      cacheKey = header.kind === 'llama2c' ? convertedKey : url; // .mlb and GGUF bytes (the engine converts GGUF itself)
      if (header.kind === 'llama2c') {
        const tok = await readSource(tokenizer, { progress, phase: 'tokenizer' });
        this.unload();
        progress({ phase: 'convert', loaded: 0, total: 1 });
        bytes = this.convert(bytes, tok.bytes, name);
        progress({ phase: 'convert', loaded: 1, total: 1 });
      }
    }
    this.unload();
    progress({ phase: 'load', loaded: 0, total: bytes.length });
    const p = this.toHeap(bytes);
    const s = this.mod._krafla_open(p, bytes.length, ctx, 0, this.threads, 0);
    if (!s) {
      const e = this.fail(`${name}`);
      if (fromCache && cacheKey && isBadBytes(e)) {
        await cacheDelete(cache, cacheKey);
        e.message += ' (the cached copy was removed: the next load downloads it again)';
      }
      throw e;
    }
    this.session = s;
    if (!fromCache && cacheKey) await cachePut(cache, cacheKey, bytes);
    bytes = null;
    progress({ phase: 'load', loaded: 1, total: 1 });
    return { ...this.info(), fromCache, build: this.build.name };
  }

  // llama2.c checkpoint + tokenizer.bin -> .mlb bytes, with the engine's own converter in wasm.
  convert(checkpoint, tokenizer, name) {
    const { FS } = this.mod;
    FS.writeFile('/ckpt.bin', checkpoint);
    FS.writeFile('/tokenizer.bin', tokenizer);
    try {
      const rc = this.mod.ccall('krafla_convert_llama2c', 'number', ['string', 'string', 'string', 'number', 'number'],
        ['/ckpt.bin', '/tokenizer.bin', '/model.mlb', 0, 0]);
      if (rc !== 0) throw this.fail(`${name}: converting the llama2.c checkpoint`);
      return FS.readFile('/model.mlb');
    } finally {
      for (const f of ['/ckpt.bin', '/tokenizer.bin', '/model.mlb']) {
        try { FS.unlink(f); } catch { /* not written */ }
      }
    }
  }

  info() {
    const m = this.mod;
    const i = JSON.parse(m.UTF8ToString(m._krafla_info_json(this.session)));
    return {
      vocabSize: i.vocab_size, ctx: i.ctx, maxSeq: i.max_seq, dim: i.dim, hiddenDim: i.hidden_dim, nLayers: i.n_layers,
      nHeads: i.n_heads, nKvHeads: i.n_kv_heads, headDim: i.head_dim, wtype: i.wtype, bosId: i.bos_id, eosId: i.eos_id,
      hasTokenizer: i.has_tokenizer, hasChatTemplate: i.has_chat_template, tokenizerKind: i.tokenizer_kind,
      nThreads: i.n_threads, batch: i.batch, packG: i.packed ? i.pack_g : 0,
      stateBytes: i.state_bytes, packedBytes: i.packed_bytes, modelBytes: i.model_bytes, isa: i.isa,
    };
  }

  unload() {
    this.heldTokens = null; // the ids whose KV the session holds (generate.js reusePrefix)
    if (this.session) {
      this.mod._krafla_close(this.session);
      this.session = 0;
    }
  }

  op_unload() {
    this.unload();
    return true;
  }

  op_info() {
    return this.session ? this.info() : null;
  }

  tokenize(text, addBos) {
    const s = this.requireSession();
    const m = this.mod;
    return this.withString(text, (p, len) => {
      let cap = len + 3;
      for (;;) {
        const ids = m._malloc(cap * 4);
        try {
          const n = m._krafla_tokenize(s, p, len, addBos ? 1 : 0, ids, cap);
          if (n < 0) throw this.fail('krafla: tokenize');
          if (n <= cap) return Array.from(this.i32(ids, n));
          cap = n;
        } finally {
          m._free(ids);
        }
      }
    });
  }

  op_tokenize(_id, { text, addBos = false }) {
    return this.tokenize(String(text), addBos);
  }

  pieceBytes(ptr, len) {
    return this.heap().slice(ptr, ptr + len);
  }

  // Token ids to text: a Hugging Face tokenizer's decode(ids, skip_special_tokens) exactly, or
  // llama2.c's pieces (krafla_detokenize).
  op_detokenize(_id, { ids, skipSpecial = false }) {
    const s = this.requireSession();
    const m = this.mod;
    const vocab = this.info().vocabSize;
    for (const id of ids) {
      if (!Number.isInteger(id) || id < 0 || id >= vocab) {
        throw new KraflaError(`krafla: detokenize: token id ${id} is outside the vocabulary 0..${vocab - 1}`, 'arg');
      }
    }
    const buf = m._malloc(Math.max(1, ids.length) * 4);
    const lenp = m._malloc(4);
    try {
      new Int32Array(this.heap().buffer, buf, ids.length).set(ids);
      const p = m._krafla_detokenize(s, buf, ids.length, skipSpecial ? 1 : 0, lenp);
      if (!p) throw this.fail('krafla: detokenize');
      try {
        return new TextDecoder('utf-8').decode(this.pieceBytes(p, this.i32(lenp, 1)[0]));
      } finally {
        m._free(p);
      }
    } finally {
      m._free(lenp);
      m._free(buf);
    }
  }

  // The model's chat template over messages, as transformers' apply_chat_template(tokenize=False).
  op_chat(_id, { messages, addGenerationPrompt = true, vars = null, chatTemplate = null }) {
    const s = this.requireSession();
    const m = this.mod;
    if (!Array.isArray(messages)) throw new KraflaError('krafla: applyChatTemplate: messages must be an array', 'arg');
    const lenp = m._malloc(4);
    try {
      return this.withString(JSON.stringify(messages), (mp, ml) =>
        this.withString(vars ? JSON.stringify(vars) : '', (vp, vl) =>
          this.withString(chatTemplate ?? '', (tp, tl) => {
            const p = m._krafla_chat_apply(s, mp, ml, addGenerationPrompt ? 1 : 0, vp, vl, tp, tl, lenp);
            if (!p) throw this.fail('krafla: applyChatTemplate');
            try {
              return new TextDecoder('utf-8').decode(this.pieceBytes(p, this.i32(lenp, 1)[0]));
            } finally {
              m._free(p);
            }
          })));
    } finally {
      m._free(lenp);
    }
  }

  op_generate(id, o) {
    return generate(this, id, o);
  }

  op_bench(_id, o) {
    return bench(this, o);
  }
}
