// The main-thread API: spawns the engine in a Web Worker (browsers), a worker_thread (node) or
// in-process, and turns its messages into promises and async iterators. See index.d.ts.
import { modelCache } from './cache.js';
import { KraflaError } from './errors.js';
import { isHfSource, normalizeHf } from './hf.js';
import { ChatCompletions, Completions } from './chat.js';

const isNode = typeof process === 'object' && !!process.versions?.node && typeof window === 'undefined';

/** Token events the worker may send ahead of what the consumer has taken (generate's flow control). */
export const FLOW_WINDOW = 8;

function canShare() {
  return typeof SharedArrayBuffer === 'function' && (isNode || globalThis.crossOriginIsolated === true);
}

async function spawn(mode, onMessage) {
  const url = new URL('./worker.js', import.meta.url);
  if (mode === 'inprocess') {
    const { Host } = await import('./host.js');
    const host = new Host((m) => queueMicrotask(() => onMessage(m)));
    return { post: (m) => queueMicrotask(() => host.handle(m)), terminate: () => host.unload() };
  }
  if (isNode) {
    const { Worker } = await import('node:worker_threads');
    const w = new Worker(url);
    w.on('message', onMessage);
    w.on('error', (e) => onMessage({ type: 'crash', error: e }));
    // Keep node alive only while a call is pending (an idle engine must not hold the process open).
    return { post: (m) => w.postMessage(m), terminate: () => w.terminate(), ref: () => w.ref(), unref: () => w.unref() };
  }
  const w = new Worker(url, { type: 'module' });
  w.onmessage = (e) => onMessage(e.data);
  w.onerror = (e) => onMessage({ type: 'crash', error: new Error(e.message || 'the krafla worker failed to start') });
  return { post: (m) => w.postMessage(m), terminate: () => w.terminate() };
}

export class Krafla {
  /** The model cache (cache.js): list, has, delete, clear, size. */
  static cache = modelCache;

  /** Use Krafla.create(). */
  constructor() {
    this.nextId = 1;
    this.pending = new Map();
    this.channel = null;
    this.build = null;
    this.model = null;
    this.lastStats = null;
    // The openai client's surface (chat.js): k.chat.completions.create, k.completions.create.
    this.chat = { completions: new ChatCompletions(this) };
    this.completions = new Completions(this);
  }

  /**
   * Starts the engine and picks the wasm build (see index.d.ts for the options).
   * @returns {Promise<Krafla>}
   */
  static async create(options = {}) {
    const k = new Krafla();
    const mode = options.worker === false ? 'inprocess' : 'worker';
    k.channel = await spawn(mode, (m) => k.onMessage(m));
    const distUrl = options.distUrl ? new URL(options.distUrl, isNode ? `file://${process.cwd()}/` : location.href).href
      : new URL('../dist/', import.meta.url).href;
    k.build = await k.call('init', { distUrl, builds: options.builds, threads: options.threads, build: options.build });
    return k;
  }

  onMessage(m) {
    if (m.type === 'crash') {
      for (const p of this.pending.values()) p.reject(new KraflaError(`krafla: the worker failed: ${m.error?.message ?? m.error}`, 'crash'));
      this.pending.clear();
      return;
    }
    const p = this.pending.get(m.id);
    if (!p) return;
    if (m.type === 'event') p.onEvent?.(m.event);
    else {
      this.pending.delete(m.id);
      if (m.type === 'result') p.resolve(m.value);
      else p.reject(new KraflaError(m.error.message, m.error.kind));
    }
  }

  call(method, args, onEvent) {
    if (!this.channel) return Promise.reject(new KraflaError('krafla: this engine was terminated', 'state'));
    const id = this.nextId++;
    const p = new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, onEvent });
      this.channel.ref?.();
      this.channel.post({ type: 'call', id, method, args });
    });
    const settle = () => { if (this.pending.size === 0) this.channel?.unref?.(); };
    p.then(settle, settle);
    return p;
  }

  /**
   * Loads a model: a URL, ArrayBuffer, typed array, Blob or File (.mlb, GGUF, or a llama2.c
   * checkpoint with options.tokenizer), or a Hugging Face folder {hf, revision} (hf.js).
   */
  async load(source, options = {}) {
    const { onProgress, tokenizer, ctx, cache, maxMemoryBytes } = options;
    const clone = (s) => (s instanceof URL ? s.href : s);
    try {
      // A relative folder URL is the page's (the worker would resolve it against its script).
      if (isHfSource(source)) source = normalizeHf(source, isNode ? undefined : globalThis.location?.href);
      // So is a relative model or tokenizer URL (and so its cache key).
      const page = (s) => (typeof s === 'string' && !isNode && globalThis.location ? new URL(s, globalThis.location.href).href : s);
      source = page(source);
      this.model = await this.call('load', { source: clone(source), tokenizer: page(clone(tokenizer)), ctx, cache, maxMemoryBytes },
        (e) => e.type === 'progress' && onProgress?.({ ...e, fraction: e.total ? Math.min(1, e.loaded / e.total) : null }));
    } catch (e) {
      // A load that fails before the engine opens the new model keeps the one loaded before.
      if (!(await this.call('info', {}).catch(() => null))) this.model = null;
      throw e;
    }
    return this.model;
  }

  /**
   * Text to token ids: a Hugging Face tokenizer's encode(text, add_special_tokens) exactly
   * (addSpecial, or its older name addBos: llama2.c's BOS).
   */
  tokenize(text, { addSpecial, addBos = false } = {}) {
    return this.call('tokenize', { text, addBos: addSpecial ?? addBos });
  }

  /** Token ids to text: a Hugging Face tokenizer's decode(ids, skip_special_tokens) exactly. */
  detokenize(ids, { skipSpecial = false } = {}) {
    return this.call('detokenize', { ids: Array.from(ids), skipSpecial });
  }

  /**
   * The model's chat template rendered over messages ([{role, content}, ...]) as transformers'
   * apply_chat_template(messages, tokenize=False, add_generation_prompt) renders it. vars: extra
   * template variables ({enable_thinking: false}); chatTemplate: a Jinja template replacing the model's.
   */
  applyChatTemplate(messages, { addGenerationPrompt = true, vars = null, chatTemplate = null } = {}) {
    return this.call('chat', { messages, addGenerationPrompt, vars, chatTemplate });
  }

  /**
   * Generates text: an async iterator of text pieces (whole UTF-8 characters). Its return value
   * (and this.lastStats) holds the statistics. Flow control: the engine runs at most FLOW_WINDOW
   * token events ahead of what the consumer has taken. Abort (the signal, or leaving the loop):
   * nothing is yielded (nor passed to onToken) after it, the engine stops within one token, and
   * the iteration ends with stopReason 'abort' (an already-aborted signal: at once, with no text).
   */
  async *generate(prompt, options = {}) {
    const { signal, onStats, onToken, ...rest } = options;
    const queue = [];
    let wake = null;
    let finished = false;
    let stopped = false; // aborted: drop whatever arrives from now on
    let failure = null;
    let stats = null;
    let unacked = 0; // events taken by the consumer and not yet credited back to the worker
    const notify = () => { const w = wake; wake = null; w?.(); };
    const id = this.nextId;
    this.lastStats = null;
    const credit = (n) => {
      unacked += n;
      if (unacked >= FLOW_WINDOW / 2 && !finished && !stopped) { this.channel?.post({ type: 'credit', id, n: unacked }); unacked = 0; }
    };
    // Where memory can be shared (node, cross-origin isolated pages) the abort is a flag the
    // worker reads before every token, so it lands within one token even when tokens are faster
    // than a message; elsewhere the 'abort' message is read between tokens.
    const flag = canShare() ? new Int32Array(new SharedArrayBuffer(4)) : null;
    const abort = () => {
      if (stopped) return;
      stopped = true;
      queue.length = 0;
      if (flag) Atomics.store(flag, 0, 1);
      this.channel?.post({ type: 'abort', id });
      notify();
    };
    if (signal?.aborted && flag) Atomics.store(flag, 0, 1);
    const done = this.call('generate', { prompt, ...rest, abortFlag: flag, window: FLOW_WINDOW }, (e) => {
      if (e.type !== 'text' || stopped) return;
      onToken?.({ n: e.n, text: e.text });
      if (stopped) return; // onToken aborted
      if (e.text) { queue.push(e.text); notify(); } else credit(1);
    })
      .then((s) => { stats = s; }, (e) => { failure = e; })
      .finally(() => { finished = true; notify(); });
    if (signal?.aborted) abort();
    else signal?.addEventListener('abort', abort, { once: true });
    try {
      for (;;) {
        if (queue.length) { const piece = queue.shift(); credit(1); yield piece; continue; }
        if (finished || stopped) break;
        await new Promise((r) => { wake = r; });
      }
    } finally {
      signal?.removeEventListener('abort', abort);
      if (!finished) abort(); // the consumer stopped iterating early (or aborted): the engine stops within a token
      await done;
      if (!failure) this.lastStats = stats;
    }
    if (failure) throw failure;
    onStats?.(stats);
    return stats;
  }

  /** Generates and returns the whole text and the statistics. */
  async complete(prompt, options = {}) {
    let text = '';
    const it = this.generate(prompt, options);
    for (;;) {
      const r = await it.next();
      if (r.done) return { text, stats: r.value };
      text += r.value;
    }
  }

  /** Prefill and decode speed (the benchmark). */
  bench(options = {}) {
    return this.call('bench', options);
  }

  /** Frees the model's memory; the engine stays ready for another load. */
  async unload() {
    await this.call('unload', {});
    this.model = null;
  }

  /** Stops the worker. */
  terminate() {
    this.channel?.terminate();
    this.channel = null;
    for (const p of this.pending.values()) p.reject(new KraflaError('krafla: terminated', 'state'));
    this.pending.clear();
  }
}
