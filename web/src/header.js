// Reads a model's first bytes (the .mlb header, docs/format.md, or a llama2.c checkpoint header)
// and estimates the wasm memory loading it takes, so that a model that cannot fit is refused
// before it is downloaded.

export const MLB_HEADER_BYTES = 256;
const MIB = 1024 * 1024;
const GIB = 1024 * MIB;
/** wasm32 addresses 4 GiB; the builds are linked with -sMAXIMUM_MEMORY=4GB. */
export const WASM32_MAX_BYTES = 4 * GIB;
/** Code, stack, the tokenizer's tables and malloc's overhead, on top of the estimate. */
const SLACK_BYTES = 64 * MIB;

function u64(dv, off) {
  return dv.getUint32(off, true) + dv.getUint32(off + 4, true) * 2 ** 32;
}

export function formatBytes(n) {
  if (n >= GIB) return `${(n / GIB).toFixed(2)} GiB`;
  if (n >= MIB) return `${(n / MIB).toFixed(1)} MiB`;
  return `${n} bytes`;
}

/**
 * Identifies the model from its first bytes (at least 256 for .mlb, 28 for llama2.c).
 * Returns {kind: 'mlb'|'llama2c'|'gguf', ...shape} or throws an Error naming what is wrong.
 */
export function parseHeader(bytes, name = 'the model') {
  const b = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const magic = String.fromCharCode(...b.subarray(0, 8));
  if (magic.startsWith('GGUF')) {
    // The engine converts a GGUF file at load (ml_model_open_memory); its shape is read there.
    if (b.length < 8) throw new Error(`${name}: ${b.length} bytes, too short for a GGUF header`);
    const version = dv.getUint32(4, true);
    if (version !== 2 && version !== 3) throw new Error(`${name}: GGUF version ${version} is not supported (versions 2 and 3 are)`);
    return { kind: 'gguf', version };
  }
  if (magic === 'KRAFLMLB') {
    if (b.length < MLB_HEADER_BYTES) throw new Error(`${name}: ${b.length} bytes, too short for a .mlb header (256 bytes)`);
    const f = (o) => dv.getUint32(o, true);
    const h = {
      kind: 'mlb', version: f(8), dim: f(20), hiddenDim: f(24), nLayers: f(28), nHeads: f(32), nKvHeads: f(36),
      headDim: f(40), vocabSize: f(44), maxSeq: f(48), wtype: f(52), fileSize: u64(dv, 176),
    };
    if (h.version !== 1 && h.version !== 2) throw new Error(`${name}: .mlb version ${h.version} is not supported (this package reads versions 1 and 2)`);
    return h;
  }
  if (b.length < 28) throw new Error(`${name}: ${b.length} bytes: not a krafla .mlb model nor a llama2.c checkpoint`);
  let o = 0;
  let legacy = true;
  if (dv.getUint32(0, true) === 0x616b3432) { // "ak42": llama2.c version 1
    if (b.length < 36) throw new Error(`${name}: too short for a llama2.c version 1 header`);
    o = 8;
    legacy = false;
  }
  const v = [0, 1, 2, 3, 4, 5, 6].map((i) => dv.getInt32(o + 4 * i, true));
  const vocab = Math.abs(v[5]);
  const plausible = v.every((x, i) => (i === 5 ? x !== 0 : x > 0)) && v[0] <= 65536 && v[1] <= 1 << 20 && v[2] <= 4096 &&
    v[3] <= 4096 && v[4] <= v[3] && vocab <= 1 << 22 && v[6] <= 1 << 22 && v[0] % v[3] === 0;
  if (!plausible) {
    throw new Error(`${name}: not a krafla .mlb model (no KRAFLMLB magic) nor a llama2.c checkpoint (implausible header ${v.join(', ')})`);
  }
  const [dim, hidden, layers, heads, kvHeads, , seq] = v;
  const kvDim = (dim / heads) * kvHeads;
  const shared = legacy ? v[5] > 0 : b[o + 28] !== 0;
  let floats = vocab * dim + layers * (2 * dim + dim * dim * 2 + 2 * kvDim * dim + 3 * hidden * dim) + dim;
  if (legacy) floats += seq * (dim / heads);
  if (!shared) floats += vocab * dim;
  return {
    kind: 'llama2c', legacy, dim, hiddenDim: hidden, nLayers: layers, nHeads: heads, nKvHeads: kvHeads,
    headDim: dim / heads, vocabSize: vocab, maxSeq: seq, wtype: 2, fileSize: (legacy ? 28 : 256) + 4 * floats,
  };
}

/** Bytes of the runtime state (KV cache in f32, activations for a 128-token batch, RoPE, logits). */
export function stateBytes(h, ctx = 0) {
  const c = ctx > 0 ? Math.min(ctx, h.maxSeq) : h.maxSeq;
  const kvDim = h.headDim * h.nKvHeads;
  const qDim = h.headDim * h.nHeads;
  const B = 128;
  const act = B * (3 * Math.max(h.dim, qDim) + qDim + 2 * kvDim + 3 * Math.max(h.hiddenDim, h.dim) + h.vocabSize) * 4;
  const kv = 2 * h.nLayers * c * kvDim * 4;
  const rope = c * h.headDim * 4;
  return act + kv + rope + c * 4 * 4;
}

/**
 * The wasm memory a model needs once loaded: its bytes (wasm has no mmap), a packed copy of the
 * weights where the build packs, and the state; for a llama2.c checkpoint also the float32 file
 * read by the converter and the quantized .mlb it writes.
 */
export function estimateMemory(h, { packed = true, ctx = 0 } = {}) {
  const q8Bytes = (n) => n * (34 / 32); // Q8: 32 quants + a 2..4-byte scale per 32 weights
  let model = h.fileSize;
  let convert = 0;
  if (h.kind === 'llama2c') {
    model = q8Bytes((h.fileSize - 28) / 4) * 1.06;
    convert = h.fileSize + model; // the checkpoint read into memory, plus the .mlb being written
  }
  const weights = packed ? model : 0;
  return Math.max(convert, model + weights + stateBytes(h, ctx)) + SLACK_BYTES;
}

/** Throws when the model cannot fit in `limit` bytes of wasm memory; returns the estimate. */
export function checkFits(h, name, { limit = WASM32_MAX_BYTES, packed = true, ctx = 0 } = {}) {
  if (h.kind === 'gguf') return 0; // its shape is known only once converted; the engine fails cleanly (nomem)
  const need = estimateMemory(h, { packed, ctx });
  const cap = Math.min(limit, WASM32_MAX_BYTES);
  if (need > cap) {
    const what = h.kind === 'mlb' ? `${formatBytes(h.fileSize)} .mlb` : `${formatBytes(h.fileSize)} llama2.c checkpoint`;
    const why = cap === WASM32_MAX_BYTES && limit >= WASM32_MAX_BYTES ? 'wasm32 addresses at most 4 GiB'
      : `the memory limit here is ${formatBytes(cap)}`;
    throw new Error(`${name}: this model cannot fit: the ${what} (dim ${h.dim}, ${h.nLayers} layers, vocab ${h.vocabSize}, context ${h.maxSeq}) ` +
      `needs about ${formatBytes(need)} of wasm memory, and ${why}.`);
  }
  return need;
}
