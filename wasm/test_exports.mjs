// wasm.exports (ctest): the C API of krafla.mjs under node, as the web worker uses it.
//   node --no-experimental-fetch test_exports.mjs KRAFLA_MJS SCALAR_BIN SHARED WORK
// stories260K (converted by the native scalar ml_convert) is opened from memory; greedy text,
// stepped token by token through krafla_sample/krafla_eval, must equal native ml_run's; the
// in-module llama2.c converter must produce the same bytes as native ml_convert; bad bytes must
// give a clear error, not a crash.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
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

// Greedy generation stepped from JavaScript, as the worker does it.
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

check('greedy text equals native scalar ml_run', () => {
  const s = open(readFileSync(mlb));
  assert.notEqual(s, 0, lastError());
  const info = JSON.parse(str(M._krafla_info_json(s)));
  assert.equal(info.vocab_size, 512);
  const got = generate(s, 'Once upon a time', 120);
  const want = execFileSync(join(scalarBin, 'ml_run'), [mlb, '-p', 'Once upon a time', '--temp', '0', '-n', '120'],
                            { encoding: 'utf8' });
  assert.equal(got, want.replace(/\n$/, ''));
  M._krafla_close(s);
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

console.log(failures ? `${failures} failed` : 'all passed');
process.exit(failures ? 1 : 0);
