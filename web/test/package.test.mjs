// The package under node: every wasm build in dist/ against the native scalar build (ml_run).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { chooseBuild, detectFeatures, Krafla } from '../src/index.js';
import { Host } from '../src/host.js';
import { GGUF_TYPE, withArchitecture, withTensorType } from './gguf-craft.mjs';
import { checkpoint, modelsDir, nativeGreedy, nativeMlb, nativeSampled, scalarBin, slowModel, tokenizer, webDir } from './native.mjs';

const all = JSON.parse(readFileSync(join(webDir, 'dist', 'builds.json'), 'utf8')).builds;
// KRAFLA_TEST_BUILDS=a,b limits the per-build tests (scripts/test-web runs the relaxed builds under node 22).
const builds = process.env.KRAFLA_TEST_BUILDS ? all.filter((b) => process.env.KRAFLA_TEST_BUILDS.split(',').includes(b)) : all;
const PROMPT = 'Once upon a time';

// The text ml_run prints is the prompt's pieces followed by the generated ones.
async function run(k, prompt, opts) {
  const echo = await k.detokenize(await k.tokenize(prompt, { addBos: true }));
  const pieces = [];
  const it = k.generate(prompt, opts);
  let stats;
  for (;;) {
    const r = await it.next();
    if (r.done) { stats = r.value; break; }
    pieces.push(r.value);
  }
  return { text: echo + pieces.join(''), pieces, stats };
}

test('dist/ holds at least one wasm build', () => {
  assert.ok(builds.length > 0, 'run scripts/copy-builds.mjs after building the wasm presets (and check KRAFLA_TEST_BUILDS)');
});

// Builds this node cannot run (relaxed SIMD needs node 22: ../shared/TOOLCHAIN.md section 1) are
// reported as skipped; Chromium runs them (e2e/).
const runnable = (b) => { try { chooseBuild([b], detectFeatures(), { force: b }); return true; } catch { return false; } };
for (const build of builds.filter((b) => !runnable(b))) test(`build ${build}`, { skip: `this node cannot run ${build}` }, () => {});

for (const build of builds.filter(runnable)) {
  describe(`build ${build}`, () => {
    let k;
    before(async () => {
      k = await Krafla.create({ build, threads: build.endsWith('_mt') ? 2 : undefined });
      await k.load(nativeMlb());
    });
    after(() => k?.terminate());

    test('reports the build it runs', () => {
      assert.equal(k.build.name, build);
      assert.equal(k.build.threaded, build.endsWith('_mt'));
      assert.equal(k.model.nThreads, build.endsWith('_mt') ? 2 : 1);
      assert.match(k.build.reason, /simd128: (yes|no)/);
    });

    test('greedy text equals the native scalar build', async () => {
      const r = await run(k, PROMPT, { temperature: 0, maxTokens: 200 });
      assert.equal(r.text, nativeGreedy(PROMPT, 200));
      assert.equal(r.stats.generatedTokens, 200);
      assert.equal(r.stats.stopReason, 'length');
      assert.ok(r.pieces.length > 50, 'text arrives in pieces');
    });

    test('seeded sampling equals the native scalar build', async () => {
      const r = await run(k, 'The cat', { temperature: 0.8, topP: 0.9, seed: 42, maxTokens: 120 });
      assert.equal(r.text, nativeSampled('The cat', 120, 0.8, 0.9, 42));
      assert.equal(r.stats.seed, '42');
    });
  });
}

describe('one engine', () => {
  let k;
  before(async () => {
    k = await Krafla.create();
  });
  after(() => k?.terminate());

  test('a llama2.c checkpoint + tokenizer.bin is converted in the worker: same greedy text', async () => {
    const phases = new Set();
    const info = await k.load(checkpoint, { tokenizer, onProgress: (p) => phases.add(p.phase) });
    assert.equal(info.dim, 64);
    assert.equal(info.vocabSize, 512);
    assert.deepEqual([...phases], ['download', 'tokenizer', 'convert', 'load']);
    const r = await run(k, PROMPT, { temperature: 0, maxTokens: 100 });
    assert.equal(r.text, nativeGreedy(PROMPT, 100));
  });

  test('a GGUF file is converted by the engine at load: the same greedy text as its llama2.c twin', async () => {
    const info = await k.load(join(modelsDir, 'stories260K-gguf', 'stories260K.gguf'));
    assert.equal(info.dim, 64);
    assert.equal(info.vocabSize, 512);
    const r = await run(k, PROMPT, { temperature: 0, maxTokens: 100 });
    assert.equal(r.text, nativeGreedy(PROMPT, 100));
  });

  test('loads from an ArrayBuffer and a Blob', async () => {
    const bytes = readFileSync(nativeMlb());
    await k.load(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length));
    const a = await k.complete(PROMPT, { temperature: 0, maxTokens: 30 });
    await k.load(new Blob([bytes]));
    const b = await k.complete(PROMPT, { temperature: 0, maxTokens: 30 });
    assert.equal(a.text, b.text);
    assert.ok(a.text.length > 20);
  });

  test('tokenize and detokenize round-trip, UTF-8 included', async () => {
    await k.load(nativeMlb());
    const ids = await k.tokenize('Lily saw a café, naïve 日本 🌍', { addBos: true });
    assert.equal(ids[0], 1);
    assert.equal(await k.detokenize(ids), 'Lily saw a café, naïve 日本 🌍');
  });

  test('streamed pieces never split a UTF-8 character', async () => {
    // At temperature 50 the model emits raw byte tokens; find a seed whose native output holds a
    // whole multi-byte character assembled from them, then compare with the streamed pieces. On
    // the scalar build where there is one: this is about the pieces, not about the kernels.
    const scalar = all.includes('wasm_scalar') ? await Krafla.create({ build: 'wasm_scalar' }) : k;
    await scalar.load(nativeMlb());
    let found = false;
    for (let seed = 1; seed <= 30 && !found; ++seed) {
      const expected = nativeSampled(PROMPT, 300, 50, 1, seed);
      if (!/[^\x00-\x7f\ufffd]/u.test(expected)) continue;
      found = true;
      const r = await run(scalar, PROMPT, { temperature: 50, topP: 1, seed, maxTokens: 300 });
      assert.equal(r.text, expected);
      for (const p of r.pieces) assert.ok(!/[\ud800-\udbff]$/.test(p), 'a piece ends inside a surrogate pair');
    }
    if (scalar !== k) scalar.terminate();
    assert.ok(found, 'no seed produced a multi-byte character (the test needs one)');
  });

  test('stop strings end the text before them', async () => {
    await k.load(nativeMlb());
    const full = (await k.complete(PROMPT, { temperature: 0, maxTokens: 100 })).text;
    const r = await k.complete(PROMPT, { temperature: 0, maxTokens: 100, stop: ['Lily'] });
    assert.equal(r.stats.stopReason, 'stop');
    assert.equal(r.text, full.slice(0, full.indexOf('Lily')));
  });

  test('a stop string spanning two tokens is cut exactly; the text that may start it is held back', async () => {
    await k.load(nativeMlb());
    const events = [];
    const full = await k.complete(PROMPT, { temperature: 0, maxTokens: 100, onToken: (t) => events.push(t) });
    assert.equal(events.length, 100);
    // The last 2 characters of token i's text and the first 2 of token i + 1's, where that is the
    // first place those 4 characters occur.
    let i = 20, stop = '', cut = -1;
    for (; i + 1 < events.length; ++i) {
      if (events[i].text.length < 2 || events[i + 1].text.length < 2) continue;
      stop = events[i].text.slice(-2) + events[i + 1].text.slice(0, 2);
      cut = events.slice(0, i + 1).map((e) => e.text).join('').length - 2;
      if (full.text.indexOf(stop) === cut) break;
    }
    assert.ok(i + 1 < events.length, 'no stop string spanning two tokens');
    const got = [];
    const r = await k.complete(PROMPT, { temperature: 0, maxTokens: 100, stop: ['never in this story', stop], onToken: (t) => got.push(t) });
    assert.equal(r.text, full.text.slice(0, cut));
    assert.equal(r.stats.stopReason, 'stop');
    assert.equal(r.stats.generatedTokens, i + 2, 'generation ends at the token that completes the stop string');
    // Token i's event lacks the 2 characters that may start the stop string; token i + 1's is empty.
    assert.deepEqual(got.slice(-2), [{ n: i + 1, text: events[i].text.slice(0, -2) }, { n: i + 2, text: '' }]);
    // Held text that turns out not to be a stop string is released: the whole text again.
    const held = await k.complete(PROMPT, { temperature: 0, maxTokens: 100, stop: `${stop}\u0001` });
    assert.equal(held.text, full.text);
    assert.equal(held.stats.stopReason, 'length');
  });

  test('stop reasons eos and context come from the engine, as ml_run', async () => {
    await k.load(nativeMlb());
    // Greedy stories260K ends its story (EOS) before 500 tokens.
    const eos = await run(k, PROMPT, { temperature: 0, maxTokens: 500 });
    assert.equal(eos.stats.stopReason, 'eos');
    assert.ok(eos.stats.generatedTokens < 500);
    assert.equal(eos.text, nativeGreedy(PROMPT, 500));
    // A context of 16 positions: the prompt's 5, then 12 generated (the last one is not fed).
    await k.load(nativeMlb(), { ctx: 16 });
    const ctx = await run(k, PROMPT, { temperature: 0, maxTokens: 100 });
    assert.equal(ctx.stats.stopReason, 'context');
    assert.equal(ctx.stats.promptTokens, 5);
    assert.equal(ctx.stats.generatedTokens, 12);
    assert.equal(ctx.text, nativeGreedy(PROMPT, 100, ['--ctx', '16']));
    await assert.rejects(k.complete(`${PROMPT} `.repeat(4), { maxTokens: 5 }),
      (e) => e.kind === 'arg' && /more than the 16 positions left of the context of 16/.test(e.message));
  });

  test('abort takes effect within one token and leaves the engine ready', async () => {
    await k.load(slowModel()); // over 10 ms a token: the pieces reach us as they are made
    const ctl = new AbortController();
    let seen = 0;
    let made = 0;
    let madeAtAbort = 0;
    const it = k.generate(PROMPT, { temperature: 0, maxTokens: 1000, signal: ctl.signal, onToken: (t) => { made = t.n; } });
    let stats;
    for (;;) {
      const r = await it.next();
      if (r.done) { stats = r.value; break; }
      if (++seen === 10) { madeAtAbort = made; ctl.abort(); }
    }
    assert.equal(stats.stopReason, 'abort');
    // At most the token being computed when the abort came.
    assert.ok(stats.generatedTokens <= madeAtAbort + 1, `${stats.generatedTokens} tokens, ${madeAtAbort} when aborted`);
    await k.load(nativeMlb());
    const r = await run(k, PROMPT, { temperature: 0, maxTokens: 60 });
    assert.equal(r.text, nativeGreedy(PROMPT, 60));
  });

  test('breaking out of the loop stops the generation too', async () => {
    await k.load(nativeMlb());
    let n = 0;
    for await (const piece of k.generate(PROMPT, { temperature: 0, maxTokens: 400 })) { if (piece && ++n === 3) break; }
    const r = await k.complete(PROMPT, { temperature: 0, maxTokens: 20 });
    assert.equal(r.stats.generatedTokens, 20);
  });

  test('bad files give clear errors (kinds format, io, arg), keep the model loaded, and the engine stays usable', async () => {
    await k.load(nativeMlb());
    const before = await k.complete(PROMPT, { temperature: 0, maxTokens: 20 });
    await assert.rejects(k.load(new Uint8Array(1000).fill(7)), (e) => e.name === 'KraflaError' && e.kind === 'format' &&
      /not a krafla \.mlb model .*nor a llama2\.c checkpoint/.test(e.message));
    await assert.rejects(k.load(new Blob(['<html>not found</html>'])), (e) => e.kind === 'format');
    await assert.rejects(k.load(checkpoint), (e) => e.kind === 'arg' && /needs its tokenizer\.bin/.test(e.message));
    await assert.rejects(k.load(join(webDir, 'no-such-model.mlb')), (e) => e.kind === 'io' && /no-such-model\.mlb: the download failed/.test(e.message));
    // None of these reached the engine: the model loaded before is still there.
    assert.equal(k.model?.dim, 64);
    assert.equal((await k.complete(PROMPT, { temperature: 0, maxTokens: 20 })).text, before.text);
    const bytes = readFileSync(nativeMlb());
    await assert.rejects(k.load(bytes.subarray(0, bytes.length >> 1)), (e) => e.kind === 'format' && /file_size|bytes|truncat/i.test(e.message));
    await assert.rejects(k.generate(PROMPT).next(), /no model is loaded/);
    await k.load(nativeMlb());
    assert.equal((await k.complete(PROMPT, { temperature: 0, maxTokens: 10 })).stats.generatedTokens, 10);
    await assert.rejects(k.complete(PROMPT, { topP: 0 }), /topP 0 must be in \(0, 1\]/);
  });

  test('an unsupported GGUF (architecture, tensor type) is refused, kind format, naming it as native ml_run does', async () => {
    const src = join(modelsDir, 'stories260K-gguf', 'stories260K.gguf');
    const dir = mkdtempSync(join(tmpdir(), 'krafla-gguf-'));
    try {
      withArchitecture(src, join(dir, 'arch.gguf'), 'mamba');
      withTensorType(src, join(dir, 'q8_1.gguf'), 'blk.0.attn_q.weight', GGUF_TYPE.Q8_1);
      for (const [f, what] of [['arch.gguf', 'architecture "mamba" is not supported (llama, qwen2, qwen3, gemma3, qwen35)'],
        ['q8_1.gguf', 'tensor blk.0.attn_q.weight: type Q8_1 is not supported (F32, F16, BF16, Q8_0']]) {
        const native = spawnSync(join(scalarBin, 'ml_run'), [join(dir, f), '-p', 'x', '-n', '1'], { encoding: 'utf8' });
        assert.ok(native.status !== 0 && native.stderr.includes(what), native.stderr); // the oracle says the same
        await assert.rejects(k.load(readFileSync(join(dir, f))), (e) => e.kind === 'format' && e.message.includes(what) && !/implausible/.test(e.message));
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    await k.load(nativeMlb());
    assert.equal((await k.complete(PROMPT, { temperature: 0, maxTokens: 10 })).stats.generatedTokens, 10);
  });

  test('unload frees the model; a later load works', async () => {
    await k.load(nativeMlb());
    await k.unload();
    assert.equal(k.model, null);
    await assert.rejects(k.tokenize('x'), /no model is loaded/);
    await k.load(nativeMlb());
    assert.ok((await k.tokenize('x')).length > 0);
  });
});

test('the default thread count is up to 4, the hardware\'s count (node 20 has no navigator: os.availableParallelism)', async () => {
  const { availableParallelism } = await import('node:os');
  const k = await Krafla.create();
  try {
    assert.equal(k.build.features.hardwareConcurrency, availableParallelism());
    if (k.build.threaded) assert.equal(k.build.nThreads, Math.min(4, availableParallelism()));
  } finally {
    k.terminate();
  }
});

test('a model too big for wasm32 is refused after its header, before the download', async () => {
  // A server that sends a 256-byte .mlb header claiming a 70 GB model, then never finishes.
  const h = Buffer.alloc(256);
  h.write('KRAFLMLB', 0, 'latin1');
  const u32 = [[8, 1], [12, 256], [20, 8192], [24, 28672], [28, 80], [32, 64], [36, 8], [40, 128], [44, 128256], [48, 8192], [52, 2]];
  for (const [o, v] of u32) h.writeUInt32LE(v, o);
  h.writeBigUInt64LE(70_000_000_000n, 176);
  let closed = false;
  const server = createServer((req, res) => {
    res.writeHead(200, { 'Content-Length': '70000000000' });
    res.write(h);
    req.on('close', () => { closed = true; });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const k = await Krafla.create();
  try {
    const url = `http://127.0.0.1:${server.address().port}/huge.mlb`;
    await assert.rejects(k.load(url), /cannot fit: .* needs about .* GiB of wasm memory, and wasm32 addresses at most 4 GiB/);
    await assert.rejects(k.load(url, { maxMemoryBytes: 1 << 20 }), /memory limit here is 1\.0 MiB/);
  } finally {
    k.terminate();
    server.closeAllConnections();
    server.close();
  }
  assert.ok(closed, 'the download was cancelled');
});

test('in-process mode (no worker) runs the same API', async () => {
  const k = await Krafla.create({ worker: false, build: builds.filter(runnable).find((b) => !b.endsWith('_mt')) });
  await k.load(nativeMlb());
  const r = await run(k, PROMPT, { temperature: 0, maxTokens: 50 });
  assert.equal(r.text, nativeGreedy(PROMPT, 50));
  k.terminate();
});

// The Host driven directly (as the worker does), its module's exports spied on.
test('the worker steps the engine\'s loop: krafla_gen_* only, the stop strings and the stop reason are the engine\'s', async () => {
  const events = [];
  const host = new Host((m) => { if (m.type === 'event' && m.event.type === 'text') events.push(m.event); });
  const build = builds.filter(runnable).find((b) => !b.endsWith('_mt'));
  await host.op_init(0, { distUrl: new URL('../dist/', import.meta.url).href, build });
  await host.op_load(0, { source: nativeMlb() });
  const m = host.mod;
  const calls = {};
  for (const f of ['_krafla_gen_start', '_krafla_gen_next', '_krafla_gen_cancel', '_krafla_gen_stats', '_krafla_eval', '_krafla_sample', '_krafla_piece']) {
    // Emscripten's export stubs replace themselves with the wasm function on their first call:
    // the setter keeps the spy in place.
    let real = m[f];
    calls[f] = [];
    const spy = (...a) => { calls[f].push(f === '_krafla_gen_start' ? [...a, m.HEAPU8.slice(a[11], a[11] + a[12])] : a); return real(...a); };
    Object.defineProperty(m, f, { get: () => spy, set: (v) => { real = v; }, configurable: true });
  }
  const stats = await host.op_generate(1, { prompt: PROMPT, temperature: 0, maxTokens: 100, stop: ['Lily', 'dog'] });
  assert.equal(calls._krafla_eval.length + calls._krafla_sample.length + calls._krafla_piece.length, 0, 'no JavaScript loop');
  assert.equal(calls._krafla_gen_start.length, 1);
  // The stop strings reach the engine as UTF-8, NUL-terminated, back to back.
  const [, keep, , nIds, maxTokens, , , , , , atEos, , stopsBytes, nStops, stopText] = calls._krafla_gen_start[0];
  assert.deepEqual([keep, nIds, maxTokens, atEos, stopsBytes, nStops], [0, 5, 100, 1, 9, 2]);
  assert.equal(calls._krafla_gen_next.length, stats.generatedTokens, 'one krafla_gen_next per token');
  assert.equal(events.length, stats.generatedTokens);
  assert.equal(stats.stopReason, 'stop');
  assert.ok(stats.generatedTokens < 100);
  assert.ok(!events.map((e) => e.text).join('').includes('Lily'));
  assert.equal(new TextDecoder().decode(stopText), 'Lily\0dog\0');
  host.unload();
});
