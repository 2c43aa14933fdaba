// Build choice and the header checks, without wasm.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { chooseBuild, checkFits, parseHeader, WASM32_MAX_BYTES } from '../src/index.js';

const all = ['wasm_relaxed_mt', 'wasm_relaxed', 'wasm_simd128_mt', 'wasm_simd128', 'wasm_scalar_mt', 'wasm_scalar'];
const f = (o) => ({ wasm: true, simd128: true, relaxedSimd: false, crossOriginIsolated: true, sharedMemory: true, threads: true, hardwareConcurrency: 4, node: false, ...o });

test('relaxed -> simd128 -> scalar, threads only when isolated', () => {
  assert.equal(chooseBuild(all, f({ relaxedSimd: true })).name, 'wasm_relaxed_mt');
  assert.equal(chooseBuild(all, f({})).name, 'wasm_simd128_mt');
  assert.equal(chooseBuild(all, f({ simd128: false })).name, 'wasm_scalar_mt');
  const c = chooseBuild(all, f({ crossOriginIsolated: false, threads: false }));
  assert.equal(c.name, 'wasm_simd128');
  assert.match(c.reason, /not cross-origin isolated/);
  assert.equal(chooseBuild(all, f({}), { threads: false }).name, 'wasm_simd128');
  assert.equal(chooseBuild(['wasm_scalar', 'wasm_simd128'], f({ relaxedSimd: true })).name, 'wasm_simd128');
  assert.match(chooseBuild(['wasm_scalar'], f({})).reason, /not built: .*wasm_simd128/);
  // Threads beat a higher ISA on one thread where they can run; not on one core.
  const noRelaxedMt = ['wasm_relaxed', 'wasm_simd128_mt', 'wasm_simd128', 'wasm_scalar'];
  assert.equal(chooseBuild(noRelaxedMt, f({ relaxedSimd: true })).name, 'wasm_simd128_mt');
  assert.match(chooseBuild(noRelaxedMt, f({ relaxedSimd: true })).reason, /not built: wasm_relaxed_mt$/);
  assert.equal(chooseBuild(noRelaxedMt, f({ relaxedSimd: true, hardwareConcurrency: 1 })).name, 'wasm_relaxed');
  assert.equal(chooseBuild(noRelaxedMt, f({ relaxedSimd: true, threads: false, crossOriginIsolated: false })).name, 'wasm_relaxed');
  assert.throws(() => chooseBuild(['wasm_simd128'], f({ simd128: false })), /no wasm build fits/);
  assert.throws(() => chooseBuild(all, f({ threads: false }), { force: 'wasm_scalar_mt' }), /cannot run here/);
});

test('headers: .mlb and llama2.c, with memory estimates', () => {
  const h = new Uint8Array(256);
  const dv = new DataView(h.buffer);
  h.set([...'KRAFLMLB'].map((c) => c.charCodeAt(0)));
  for (const [o, v] of [[8, 1], [20, 288], [24, 768], [28, 6], [32, 6], [36, 6], [40, 48], [44, 32000], [48, 256], [52, 2]]) dv.setUint32(o, v, true);
  dv.setUint32(176, 17_000_000, true);
  const p = parseHeader(h);
  assert.equal(p.kind, 'mlb');
  assert.equal(p.dim, 288);
  assert.ok(checkFits(p, 'x') < 200e6);
  assert.throws(() => checkFits(p, 'x', { limit: 10e6 }), /cannot fit/);
  dv.setUint32(8, 2, true);
  assert.equal(parseHeader(h).kind, 'mlb'); // format version 2 (issue 15)
  dv.setUint32(8, 3, true);
  assert.throws(() => parseHeader(h), /version 3 is not supported/);
  // A GGUF file: the engine converts it at load; its shape is not estimated here.
  const g = new Uint8Array([...'GGUF'].map((c) => c.charCodeAt(0)).concat([3, 0, 0, 0]));
  assert.equal(parseHeader(g).kind, 'gguf');
  assert.equal(checkFits(parseHeader(g), 'g'), 0);
  g[4] = 9;
  assert.throws(() => parseHeader(g), /GGUF version 9 is not supported/);

  const l = new Int32Array([288, 768, 6, 6, 6, 32000, 256]);
  const q = parseHeader(new Uint8Array(l.buffer));
  assert.equal(q.kind, 'llama2c');
  assert.equal(q.fileSize, 28 + 4 * (32000 * 288 + 6 * (2 * 288 + 4 * 288 * 288 + 3 * 768 * 288) + 288 + 256 * 48)); // stories15M.bin as published
  assert.equal(q.fileSize, 60816028);
  assert.throws(() => parseHeader(new Uint8Array(40)), /not a krafla \.mlb model .*nor a llama2\.c checkpoint/);
  assert.equal(WASM32_MAX_BYTES, 4 * 2 ** 30);
});
