// Generation and the benchmark, on the host's session. The generation loop itself is the
// engine's (ml_gen in src/engine/generate.cpp, through krafla_gen_* of wasm/README.md): it feeds
// the prompt, samples, detokenizes into whole UTF-8 characters and applies the stop strings. This
// file steps it one token per turn of the event loop, so that an abort lands between tokens.
import { KraflaError } from './errors.js';

// The stop strings as krafla_gen_start takes them: UTF-8, each NUL-terminated, back to back.
function encodeStops(stop) {
  const list = (Array.isArray(stop) ? stop : [stop]).filter((x) => typeof x === 'string' && x.length > 0);
  const enc = new TextEncoder();
  const parts = list.map((x) => {
    if (x.includes('\0')) throw new KraflaError('krafla: generate: a stop string contains a NUL character', 'arg');
    return enc.encode(x);
  });
  const bytes = new Uint8Array(parts.reduce((a, b) => a + b.length + 1, 0));
  let at = 0;
  for (const b of parts) { bytes.set(b, at); at += b.length + 1; }
  return { bytes, count: parts.length };
}

// The ids at the start of `ids` whose KV the session holds, less one when that is all of them.
function heldPrefix(host, ids) {
  const held = host.heldTokens ?? [];
  let k = 0;
  while (k < held.length && k < ids.length && held[k] === ids[k]) ++k;
  return k === ids.length ? k - 1 : k;
}

export async function generate(host, id, o) {
  const s = host.requireSession();
  const m = host.mod;
  const maxTokens = o.maxTokens ?? 256;
  const temperature = o.temperature ?? 1.0;
  const topP = o.topP ?? 0.9;
  const topK = o.topK ?? 0;
  if (!Number.isInteger(maxTokens) || maxTokens < 0) throw new KraflaError(`krafla: maxTokens ${maxTokens} must be an integer >= 0`, 'arg');
  if (!(temperature >= 0) || !Number.isFinite(temperature)) throw new KraflaError(`krafla: temperature ${temperature} must be a finite number >= 0`, 'arg');
  if (!(topP > 0 && topP <= 1)) throw new KraflaError(`krafla: topP ${topP} must be in (0, 1]`, 'arg');
  if (!Number.isInteger(topK) || topK < 0) throw new KraflaError(`krafla: topK ${topK} must be an integer >= 0`, 'arg');
  const minP = o.minP ?? 0;
  const presence = o.presencePenalty ?? 0;
  const frequency = o.frequencyPenalty ?? 0;
  if (!(minP >= 0 && minP < 1)) throw new KraflaError(`krafla: minP ${minP} must be in [0, 1)`, 'arg');
  if (!(presence >= -2 && presence <= 2)) throw new KraflaError(`krafla: presencePenalty ${presence} must be in [-2, 2]`, 'arg');
  if (!(frequency >= -2 && frequency <= 2)) throw new KraflaError(`krafla: frequencyPenalty ${frequency} must be in [-2, 2]`, 'arg');
  let seed = o.seed ?? Math.floor(Math.random() * 2 ** 53);
  seed = BigInt.asUintN(64, BigInt(seed));
  const seedLo = Number(seed & 0xffffffffn);
  const seedHi = Number(seed >> 32n);
  const stops = encodeStops(o.stop ?? []);

  const ids = o.tokens ?? host.tokenize(String(o.prompt ?? ''), o.addBos ?? true);
  if (!ids.length) throw new KraflaError('krafla: generate: the prompt is empty (pass addBos: true or some text)', 'arg');
  // reusePrefix: keep the KV of the longest common prefix of the ids the session holds (the last
  // generation's prompt and tokens) and these, feeding only the rest (at least one, for logits).
  let keep = o.reusePrefix ? heldPrefix(host, ids) : 0;
  host.heldTokens = null; // unknown until this generation ends cleanly
  const sampled = [];

  const idp = m._malloc(ids.length * 4);
  const stopp = m._malloc(Math.max(stops.bytes.length, 1));
  const io = m._malloc(12); // [0] the text's length; [1] the sampled id (-1: none); [2] done
  const dec = new TextDecoder('utf-8');
  // The engine releases whole UTF-8 characters, so each piece decodes on its own. Copied out
  // (slice) first: TextDecoder refuses views of a shared (threaded builds') heap.
  const textAt = (p) => dec.decode(host.pieceBytes(p, host.i32(io, 1)[0]));
  // One event per sampled token (its text may be empty: a BOS/EOS, a byte waiting for the rest of
  // its character, text held back as the possible start of a stop string), and one for text
  // released without a token (held text at the end).
  let n = 0;
  // Flow control: each event spends one credit; with none left the loop waits for the client's
  // 'credit' (or 'abort') message. Without a window (the Host driven directly) it never waits.
  const flow = { credit: o.window > 0 ? o.window : Infinity, wake: null };
  host.flow.set(id, flow);
  const emit = (text) => { --flow.credit; host.post({ type: 'event', id, event: { type: 'text', text, n } }); };
  const aborted = () => host.aborted.has(id) || (o.abortFlag && Atomics.load(o.abortFlag, 0));
  let wasmMs = 0;
  let t0 = 0;
  let st;
  try {
    host.i32(idp, ids.length).set(ids);
    host.heap().set(stops.bytes, stopp);
    t0 = performance.now();
    // An already-aborted signal: nothing is evaluated (gen_start would feed the prompt).
    if (aborted()) {
      keep = 0;
      return stats({ n_prompt: 0, n_generated: 0, prompt_seconds: 0, stop_reason: 'abort' });
    }
    const start = () => m._krafla_gen_start(s, keep, idp + 4 * keep, ids.length - keep, maxTokens, temperature, topP, topK,
      seedLo >>> 0, seedHi >>> 0, 1, stopp, stops.bytes.length, stops.count);
    m._krafla_gen_penalties(s, Math.min(Math.fround(minP), 1 - 2 ** -24), presence, frequency); // min_p < 1 as a float too
    // A model with linear-attention layers cannot rewind its recurrent state: keeping fewer
    // positions than it holds is refused, and the prompt is fed afresh (as ml_server does).
    let rc = start();
    if (rc < 0 && keep > 0) {
      keep = 0;
      rc = start();
    }
    if (rc < 0) throw host.fail('krafla: generate');
    for (;;) {
      while (flow.credit <= 0 && !aborted()) await new Promise((r) => { flow.wake = r; });
      flow.wake = null;
      if (aborted()) {
        const p = m._krafla_gen_cancel(s, io);
        const text = textAt(p);
        if (text) emit(text);
        break;
      }
      const a = performance.now();
      const p = m._krafla_gen_next(s, io, io + 4);
      wasmMs += performance.now() - a;
      if (!p) throw host.fail('krafla: generate');
      const text = textAt(p);
      const [tok, done] = host.i32(io + 4, 2);
      if (tok >= 0) { ++n; sampled.push(tok); }
      if (tok >= 0 || text) emit(text);
      if (done) break;
      await host.yieldNow();
    }
    st = JSON.parse(m.UTF8ToString(m._krafla_gen_stats(s)));
    // Every sampled token but the last has been fed (ml_gen_next feeds a token before sampling the next).
    host.heldTokens = ids.concat(sampled.slice(0, -1));
  } finally {
    host.flow.delete(id);
    m._free(io);
    m._free(stopp);
    m._free(idp);
  }
  return stats(st);

  // decodeSeconds is the time spent in krafla_gen_next (the engine's gen_seconds also counts the
  // turns of the event loop between tokens).
  function stats(st) {
    const t2 = performance.now();
    return {
      promptTokens: st.n_prompt,
      cachedTokens: keep,
      generatedTokens: st.n_generated,
      promptSeconds: st.prompt_seconds,
      decodeSeconds: wasmMs / 1000,
      wallSeconds: (t2 - t0) / 1000,
      promptTokensPerSecond: st.prompt_seconds > 0 ? st.n_prompt / st.prompt_seconds : 0,
      tokensPerSecond: wasmMs > 0 ? st.n_generated / (wasmMs / 1000) : 0,
      stopReason: st.stop_reason,
      seed: seed.toString(),
      build: host.build.name,
    };
  }
}

// Prefill and decode speed without the per-token round trips (the benchmark): one batched eval
// of `prompt` tokens, then `decode` single-token evals with greedy sampling; best of `reps`, after
// uncounted repetitions for at least WARMUP_MS (V8 compiles hot wasm functions with its optimising
// tier only after they have run a while, on a background thread: until then a repetition runs
// partly in baseline code, which halved stories260K's decode speed in Chromium).
const WARMUP_MS = 300;
export function bench(host, { prompt = 64, decode = 64, reps = 1 }) {
  const s = host.requireSession();
  const m = host.mod;
  const info = host.info();
  const n = Math.max(1, Math.min(prompt, info.ctx - decode - 1));
  const idp = m._malloc(n * 4);
  const fill = () => { const a = host.i32(idp, n); for (let i = 0; i < n; ++i) a[i] = i === 0 ? info.bosId : 3 + ((i * 7919) % (info.vocabSize - 3)); };
  let best = { prefill: 0, decode: 0 };
  host.heldTokens = null; // krafla_eval overwrites the session's KV
  try {
    if (m._krafla_sampler(s, 0, 1, 0, 1, 0) < 0) throw host.fail('krafla: bench');
    const rep = () => {
      fill();
      const a = performance.now();
      if (m._krafla_eval(s, idp, n, 0) < 0) throw host.fail('krafla: bench');
      const b = performance.now();
      for (let i = 0; i < decode; ++i) {
        host.i32(idp, 1)[0] = m._krafla_sample(s);
        if (m._krafla_eval(s, idp, 1, n + i) < 0) throw host.fail('krafla: bench');
      }
      const c = performance.now();
      return { prefill: n / ((b - a) / 1000), decode: decode / ((c - b) / 1000) };
    };
    for (const warm0 = performance.now(); performance.now() - warm0 < WARMUP_MS;) rep();
    for (let r = 0; r < reps; ++r) {
      const t = rep();
      best = { prefill: Math.max(best.prefill, t.prefill), decode: Math.max(best.decode, t.decode) };
    }
  } finally {
    m._free(idp);
  }
  return { promptTokens: n, decodeTokens: decode, prefillTokensPerSecond: best.prefill, decodeTokensPerSecond: best.decode,
    build: host.build.name, nThreads: host.threads };
}
