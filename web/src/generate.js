// Generation and the benchmark, on the host's session: the loop of ml_engine_generate
// (wasm/README.md) run one token per turn of the event loop, so that an abort lands between tokens.
import { KraflaError } from './errors.js';
import { StopFilter } from './stop.js';

export async function generate(host, id, o) {
  const s = host.requireSession();
  const m = host.mod;
  const info = host.info();
  const maxTokens = o.maxTokens ?? 256;
  const temperature = o.temperature ?? 1.0;
  const topP = o.topP ?? 0.9;
  const topK = o.topK ?? 0;
  if (!Number.isInteger(maxTokens) || maxTokens < 0) throw new KraflaError(`krafla: maxTokens ${maxTokens} must be an integer >= 0`, 'arg');
  if (!(temperature >= 0) || !Number.isFinite(temperature)) throw new KraflaError(`krafla: temperature ${temperature} must be a finite number >= 0`, 'arg');
  if (!(topP > 0 && topP <= 1)) throw new KraflaError(`krafla: topP ${topP} must be in (0, 1]`, 'arg');
  if (!Number.isInteger(topK) || topK < 0) throw new KraflaError(`krafla: topK ${topK} must be an integer >= 0`, 'arg');
  let seed = o.seed ?? Math.floor(Math.random() * 2 ** 53);
  seed = BigInt.asUintN(64, BigInt(seed));
  const seedLo = Number(seed & 0xffffffffn);
  const seedHi = Number(seed >> 32n);

  const ids = o.tokens ?? host.tokenize(String(o.prompt ?? ''), o.addBos ?? true);
  if (!ids.length) throw new KraflaError('krafla: generate: the prompt is empty (pass addBos: true or some text)', 'arg');
  if (ids.length > info.ctx) throw new KraflaError(`krafla: generate: the prompt has ${ids.length} tokens, more than the context of ${info.ctx}`, 'arg');
  if (m._krafla_sampler(s, temperature, topP, topK, seedLo >>> 0, seedHi >>> 0) < 0) throw host.fail('krafla: generate');

  // The loop of ml_engine_generate (wasm/README.md), one token per turn of the event loop.
  const idp = m._malloc(Math.max(ids.length, 1) * 4);
  const lenp = m._malloc(4);
  // One event per token (its text may be empty: a BOS/EOS, a byte waiting for the rest of its
  // character, text held back by a stop string).
  let pending = '';
  const stop = new StopFilter(o.stop ?? [], (text) => { pending += text; });
  const emit = (n) => {
    host.post({ type: 'event', id, event: { type: 'text', text: pending, n } });
    pending = '';
  };
  const dec = new TextDecoder('utf-8');
  let n = 0;
  let reason = 'length';
  let wasmMs = 0;
  let t0 = 0;
  let t1 = 0;
  try {
    host.i32(idp, ids.length).set(ids);
    t0 = performance.now();
    if (m._krafla_eval(s, idp, ids.length, 0) < 0) throw host.fail('krafla: generate');
    t1 = performance.now();
    let prev = ids[ids.length - 1];
    let pos = ids.length;
    while (n < maxTokens) {
      if (host.aborted.has(id) || (o.abortFlag && Atomics.load(o.abortFlag, 0))) { reason = 'abort'; break; }
      const a = performance.now();
      const tok = m._krafla_sample(s);
      ++n;
      if (tok === info.eosId || tok === info.bosId) { wasmMs += performance.now() - a; reason = 'eos'; break; }
      const p = m._krafla_piece(s, prev, tok, lenp);
      const text = dec.decode(host.pieceBytes(p, host.i32(lenp, 1)[0]), { stream: true });
      prev = tok;
      let more = n < maxTokens;
      if (more && pos >= info.ctx) { reason = 'context'; more = false; }
      if (more) {
        host.i32(idp, 1)[0] = tok;
        if (m._krafla_eval(s, idp, 1, pos) < 0) throw host.fail('krafla: generate');
        ++pos;
      }
      wasmMs += performance.now() - a;
      if (stop.push(text)) { reason = 'stop'; emit(n); break; }
      emit(n);
      if (!more) break;
      await host.yieldNow();
    }
  } finally {
    m._free(lenp);
    m._free(idp);
  }
  if (reason !== 'stop') stop.push(dec.decode());
  stop.finish(reason === 'stop');
  if (pending) emit(n);
  const t2 = performance.now();
  return {
    promptTokens: ids.length,
    generatedTokens: n,
    promptSeconds: (t1 - t0) / 1000,
    decodeSeconds: wasmMs / 1000,
    wallSeconds: (t2 - t0) / 1000,
    promptTokensPerSecond: t1 > t0 ? ids.length / ((t1 - t0) / 1000) : 0,
    tokensPerSecond: wasmMs > 0 ? n / (wasmMs / 1000) : 0,
    stopReason: reason,
    seed: seed.toString(),
    build: host.build.name,
  };
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
