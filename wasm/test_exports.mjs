// wasm.exports (ctest): the C API of krafla.mjs under node, as the web worker uses it.
//   node --no-experimental-fetch test_exports.mjs KRAFLA_MJS SCALAR_BIN SHARED WORK
// stories260K (converted by the native scalar ml_convert) is opened from memory. Greedy text must
// equal native ml_run's both through the engine's generation loop (krafla_gen_*, as the worker
// uses it) and stepped by hand through krafla_sample/krafla_eval; a stop string spanning two
// tokens must cut the text exactly; the stop reasons (length, eos, context, stop, abort) must be
// reported; the in-module llama2.c converter must produce the same bytes as native ml_convert;
// bad bytes must give a clear error, not a crash; a Hugging Face folder staged in M.FS opens with
// krafla_open_path and gives native ml_run's greedy text on the same folder.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import assert from 'node:assert/strict';

const [mjs, scalarBin, shared, work] = process.argv.slice(2);
mkdirSync(work, { recursive: true });
const ckpt = join(shared, 'models/stories260K.bin'), tok = join(shared, 'models/tok512.bin');
const mlb = join(work, 'wasm_exports_260k_q8.mlb');
if (!existsSync(mlb))
  execFileSync(join(scalarBin, 'ml_convert'), ['llama2c', ckpt, '--tokenizer', tok, '--wtype', 'q8', '-o', mlb]);

const { default: createKrafla } = await import(mjs);
const M = await createKrafla({ wasmBinary: readFileSync(mjs.replace(/\.mjs$/, '.wasm')) });
const str = (p) => M.UTF8ToString(p);
const lastError = () => str(M._krafla_last_error());

function open(bytes, nThreads = 1) {
  const p = M._krafla_alloc(bytes.length);
  assert.notEqual(p, 0, lastError());
  M.HEAPU8.set(bytes, p);
  return M._krafla_open(p, bytes.length, 0, 0, nThreads, 0);
}

function tokenize(s, prompt) {
  const len = M.lengthBytesUTF8(prompt);
  const text = M._malloc(len + 1);
  M.stringToUTF8(prompt, text, len + 1);
  let cap = 16, ids = M._malloc(4 * cap);
  let n = M._krafla_tokenize(s, text, len, 1, ids, cap);
  if (n > cap) {
    M._free(ids); cap = n; ids = M._malloc(4 * cap);
    n = M._krafla_tokenize(s, text, len, 1, ids, cap);
  }
  assert.ok(n > 0, 'tokenize: ' + lastError());
  const out = Array.from(M.HEAP32.subarray(ids >> 2, (ids >> 2) + n));
  M._free(text);
  M._free(ids);
  return out;
}

// The prompt's text as ml_run echoes it.
function echo(s, ids) {
  const lenp = M._malloc(4);
  const dec = new TextDecoder('utf-8');
  let out = '', prev = -1;
  for (const id of ids) {
    const p = M._krafla_piece(s, prev, id, lenp);
    out += dec.decode(M.HEAPU8.slice(p, p + M.HEAP32[lenp >> 2]), { stream: true });
    prev = id;
  }
  M._free(lenp);
  return out + dec.decode();
}

// The engine's generation loop (krafla_gen_start / krafla_gen_next), as the worker steps it:
// returns the pieces of text released per call, the sampled ids and the statistics. abortAfter:
// call krafla_gen_cancel after that many steps (its held text is the last piece).
function genLoop(s, ids, { maxTokens, temperature = 0, topP = 1, topK = 0, seed = 0, stops = [], abortAfter = -1, keep = 0 }) {
  const enc = new TextEncoder();
  const stopBytes = stops.map((x) => enc.encode(x));
  const nBytes = stopBytes.reduce((a, b) => a + b.length + 1, 0);
  const sp = M._malloc(Math.max(nBytes, 1));
  let at = sp;
  for (const b of stopBytes) { M.HEAPU8.set(b, at); M.HEAPU8[at + b.length] = 0; at += b.length + 1; }
  const idp = M._malloc(4 * ids.length);
  M.HEAP32.set(ids, idp >> 2);
  const io = M._malloc(12);
  const rc = M._krafla_gen_start(s, keep, idp, ids.length, maxTokens, temperature, topP, topK, seed, 0, 1, sp, nBytes, stops.length);
  assert.equal(rc, 0, lastError());
  // Whole UTF-8 characters per call: a fatal decoder throws on a split one.
  const dec = new TextDecoder('utf-8', { fatal: true });
  const bytes = (p) => M.HEAPU8.slice(p, p + M.HEAP32[io >> 2]);
  const pieces = [], sampled = [];
  for (let step = 0; ; ++step) {
    if (step === abortAfter) { pieces.push(dec.decode(bytes(M._krafla_gen_cancel(s, io)))); break; }
    const p = M._krafla_gen_next(s, io, io + 4);
    assert.notEqual(p, 0, lastError());
    pieces.push(dec.decode(bytes(p)));
    const id = M.HEAP32[(io >> 2) + 1], done = M.HEAP32[(io >> 2) + 2];
    if (id >= 0) sampled.push(id);
    if (done) break;
  }
  const stats = JSON.parse(str(M._krafla_gen_stats(s)));
  [sp, idp, io].forEach((p) => M._free(p));
  return { pieces, text: pieces.join(''), sampled, stats };
}

const nativeRun = (args) => execFileSync(join(scalarBin, 'ml_run'), [mlb, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })
  .replace(/\n$/, '');

// Greedy generation stepped from JavaScript with krafla_sample/krafla_eval (no krafla_gen_*).
function generate(s, prompt, maxTokens) {
  const len = M.lengthBytesUTF8(prompt);
  const text = M._malloc(len + 1);
  M.stringToUTF8(prompt, text, len + 1);
  let cap = 16, ids = M._malloc(4 * cap);
  let n = M._krafla_tokenize(s, text, len, 1, ids, cap);
  if (n > cap) {
    M._free(ids); cap = n; ids = M._malloc(4 * cap);
    n = M._krafla_tokenize(s, text, len, 1, ids, cap);
  }
  assert.ok(n > 0, 'tokenize: ' + lastError());
  const info = JSON.parse(str(M._krafla_info_json(s)));
  const lenp = M._malloc(4);
  const dec = new TextDecoder('utf-8');
  const piece = (prev, id) => {
    const p = M._krafla_piece(s, prev, id, lenp);
    return dec.decode(M.HEAPU8.slice(p, p + M.HEAP32[lenp >> 2]), { stream: true });
  };
  let out = '', prev = -1;
  for (let i = 0; i < n; ++i) { const id = M.HEAP32[(ids >> 2) + i]; out += piece(prev, id); prev = id; }
  assert.equal(M._krafla_eval(s, ids, n, 0), 0, lastError());
  assert.equal(M._krafla_sampler(s, 0, 1, 0, 0, 0), 0, lastError());
  let pos = n;
  const one = M._malloc(4);
  for (let g = 0; g < maxTokens; ++g) {
    const id = M._krafla_sample(s);
    if (id === info.eos_id || id === info.bos_id) break;
    out += piece(prev, id);
    prev = id;
    if (g + 1 === maxTokens) break;
    M.HEAP32[one >> 2] = id;
    assert.equal(M._krafla_eval(s, one, 1, pos++), 0, lastError());
  }
  out += dec.decode();
  [text, ids, lenp, one].forEach((p) => M._free(p));
  return out;
}

let failures = 0;
function check(name, fn) {
  try { fn(); console.log('ok  ', name); } catch (e) { ++failures; console.log('FAIL', name, '\n', e); }
}

check('build info', () => {
  const isa = str(M._krafla_build_isa());
  assert.ok(isa.length > 0);
  console.log('      isa', isa, 'threads', M._krafla_build_threads(), 'pack G', M._krafla_build_pack_g());
});

check('greedy text stepped with krafla_sample/krafla_eval equals native scalar ml_run', () => {
  const s = open(readFileSync(mlb));
  assert.notEqual(s, 0, lastError());
  const info = JSON.parse(str(M._krafla_info_json(s)));
  assert.equal(info.vocab_size, 512);
  assert.equal(generate(s, 'Once upon a time', 120), nativeRun(['-p', 'Once upon a time', '--temp', '0', '-n', '120']));
  M._krafla_close(s);
});

const PROMPT = 'Once upon a time';

check('krafla_gen_*: greedy text equals native scalar ml_run, stop reason length', () => {
  const s = open(readFileSync(mlb));
  assert.notEqual(s, 0, lastError());
  const ids = tokenize(s, PROMPT);
  const r = genLoop(s, ids, { maxTokens: 120 });
  assert.equal(echo(s, ids) + r.text, nativeRun(['-p', PROMPT, '--temp', '0', '-n', '120']));
  assert.equal(r.stats.stop_reason, 'length');
  assert.equal(r.stats.n_prompt, ids.length);
  assert.equal(r.stats.n_generated, 120);
  assert.equal(r.sampled.length, 120);
  // A second generation on the same session starts afresh (keep 0) and gives the same text.
  assert.equal(genLoop(s, ids, { maxTokens: 120 }).text, r.text);
  // keep: the session still holds the prompt; keeping its first 3 positions and feeding the rest
  // gives the same text again.
  assert.equal(genLoop(s, ids.slice(3), { maxTokens: 120, keep: 3 }).text, r.text);
  M._krafla_close(s);
});

check('krafla_gen_*: seeded sampling equals native scalar ml_run', () => {
  const s = open(readFileSync(mlb));
  const ids = tokenize(s, 'The cat');
  const r = genLoop(s, ids, { maxTokens: 100, temperature: 0.8, topP: 0.9, seed: 42 });
  assert.equal(echo(s, ids) + r.text, nativeRun(['-p', 'The cat', '--temp', '0.8', '--top-p', '0.9', '--seed', '42', '-n', '100']));
  M._krafla_close(s);
});

check('krafla_gen_*: a stop string spanning two tokens cuts the text exactly (reason stop)', () => {
  const s = open(readFileSync(mlb));
  const ids = tokenize(s, PROMPT);
  const full = genLoop(s, ids, { maxTokens: 120 });
  // The last 2 characters of piece i and the first 2 of piece i + 1, for the first i >= 20 where
  // both pieces are that long and that is the first place the 4 characters occur.
  let i = 20, stop = '', cut = -1;
  for (; i + 1 < full.pieces.length; ++i) {
    if (full.pieces[i].length < 2 || full.pieces[i + 1].length < 2) continue;
    stop = full.pieces[i].slice(-2) + full.pieces[i + 1].slice(0, 2);
    cut = full.pieces.slice(0, i + 1).join('').length - 2;
    if (full.text.indexOf(stop) === cut) break;
  }
  assert.ok(i + 1 < full.pieces.length, 'no stop string spanning two tokens found');
  const r = genLoop(s, ids, { maxTokens: 120, stops: ['no such text', stop] });
  console.log(`      stop ${JSON.stringify(stop)} at character ${cut} (pieces ${i}, ${i + 1}): ${r.stats.n_generated} tokens`);
  assert.equal(r.text, full.text.slice(0, cut));
  assert.equal(r.stats.stop_reason, 'stop');
  assert.ok(r.stats.n_generated <= i + 2, `${r.stats.n_generated} tokens, the stop string ends in token ${i + 2}`);
  // Text that could be the start of a stop string is held back, and released when it is not.
  const held = genLoop(s, ids, { maxTokens: 120, stops: [full.pieces[5] + '\u0001'] });
  assert.equal(held.text, full.text);
  assert.equal(held.stats.stop_reason, 'length');
  M._krafla_close(s);
});

check('krafla_gen_*: stop reasons eos, context and abort', () => {
  const s = open(readFileSync(mlb));
  const ids = tokenize(s, PROMPT);
  // Greedy stories260K ends its story with EOS after 312 tokens (see native ml_run).
  const eos = genLoop(s, ids, { maxTokens: 500 });
  assert.equal(eos.stats.stop_reason, 'eos');
  assert.equal(echo(s, ids) + eos.text, nativeRun(['-p', PROMPT, '--temp', '0', '-n', '500']));
  assert.ok(eos.stats.n_generated < 500);
  M._krafla_close(s);
  // A context of 16: the prompt's 5 tokens, then 12 generated (the last is not fed), as ml_run --ctx 16.
  const bytes = readFileSync(mlb);
  const p = M._krafla_alloc(bytes.length);
  M.HEAPU8.set(bytes, p);
  const c = M._krafla_open(p, bytes.length, 16, 0, 1, 0);
  assert.notEqual(c, 0, lastError());
  const ctx = genLoop(c, ids, { maxTokens: 100 });
  assert.equal(ctx.stats.stop_reason, 'context');
  assert.equal(ctx.stats.n_generated, 16 - ids.length + 1);
  assert.equal(echo(c, ids) + ctx.text, nativeRun(['-p', PROMPT, '--temp', '0', '-n', '100', '--ctx', '16']));
  // Abort after 10 steps: reason abort, 10 tokens, the text so far equals the start of the full text.
  const ab = genLoop(c, ids, { maxTokens: 100, abortAfter: 10 });
  assert.equal(ab.stats.stop_reason, 'abort');
  assert.equal(ab.stats.n_generated, 10);
  assert.ok(ctx.text.startsWith(ab.text));
  // A prompt longer than the context is refused with a message.
  const idp = M._malloc(4 * 20);
  assert.ok(M._krafla_gen_start(c, 0, idp, 20, 10, 0, 1, 0, 0, 0, 1, 0, 0, 0) < 0);
  console.log('      error:', lastError());
  assert.match(lastError(), /context/);
  M._free(idp);
  M._krafla_close(c);
});

check('bad bytes give a clear error', () => {
  const s = open(new TextEncoder().encode('this is not a model file at all, just some text'));
  assert.equal(s, 0);
  const msg = lastError();
  console.log('      error:', msg);
  assert.ok(msg.length > 10);
  assert.notEqual(M._krafla_last_status(), 0);
});

check('in-module llama2.c conversion equals native ml_convert', () => {
  M.FS.writeFile('/ckpt.bin', readFileSync(ckpt));
  M.FS.writeFile('/tok.bin', readFileSync(tok));
  const path = (s) => { const n = M.lengthBytesUTF8(s) + 1, p = M._malloc(n); M.stringToUTF8(s, p, n); return p; };
  assert.equal(M._krafla_convert_llama2c(path('/ckpt.bin'), path('/tok.bin'), path('/out.mlb'), 0, 0), 0, lastError());
  assert.deepEqual(Buffer.from(M.FS.readFile('/out.mlb')), readFileSync(mlb));
  assert.notEqual(M._krafla_convert_llama2c(path('/tok.bin'), path('/tok.bin'), path('/bad.mlb'), 0, 0), 0);
  console.log('      error:', lastError());
});

check('krafla_open_path: a Hugging Face folder in M.FS gives native ml_run\'s greedy text; without tokenizer.json a clear error', () => {
  const folder = join(shared, 'models/tinystories-656k-hf');
  M.FS.mkdir('/hf');
  for (const f of readdirSync(folder)) M.FS.writeFile(`/hf/${f}`, readFileSync(join(folder, f)));
  const openPath = (p) => M.ccall('krafla_open_path', 'number', ['string', 'number', 'number', 'number', 'number'], [p, 0, 0, 1, 0]);
  const s = openPath('/hf');
  assert.notEqual(s, 0, lastError());
  const info = JSON.parse(str(M._krafla_info_json(s)));
  assert.equal(info.tokenizer_kind, 'hf');
  assert.equal(info.dim, 128);
  const ids = tokenize(s, PROMPT);
  const r = genLoop(s, ids, { maxTokens: 40 });
  // ml_run's text less its echo of the prompt (what it prints with -n 0).
  const run = (n) => execFileSync(join(scalarBin, 'ml_run'), [folder, '-p', PROMPT, '-n', String(n), '--temp', '0'],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).replace(/\n$/, '');
  const native = run(40), nativeEcho = run(0);
  assert.ok(native.startsWith(nativeEcho) && native.length > nativeEcho.length + 100);
  assert.equal(r.text, native.slice(nativeEcho.length));
  assert.equal(r.stats.n_generated, 40);
  M._krafla_close(s);
  M.FS.unlink('/hf/tokenizer.json');
  assert.equal(openPath('/hf'), 0);
  console.log('      error:', lastError());
  assert.match(lastError(), /^\/hf: .*tokenizer\.json/);
  assert.equal(openPath('/nowhere'), 0);
  assert.match(lastError(), /\/nowhere/);
});

console.log(failures ? `${failures} failed` : 'all passed');
process.exit(failures ? 1 : 0);
