// Compares web/src/header.js's parseHeader with the C++ validator (ml_mlb_parse) on the mlb_header
// and mlb_load corpora: the committed seeds and what fuzzing grew (build/asan/fuzz-work/*/corpus).
//   node fuzz/header_js.mjs BUILD/bin/fuzz_mlb_header DIR...
// header.js sees only the first 256 bytes, so the two cannot agree on everything; what must hold:
//   - a file the C++ validator accepts, header.js accepts as 'mlb' with the same dim, layer count,
//     vocabulary and file size;
//   (so a file header.js refuses as a .mlb, the C++ validator refuses too). A file the validator
//   refuses, header.js may accept: it cannot see the directory or the file's length.
// Exits 1 on a disagreement, naming the file.
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { parseHeader } from '../web/src/header.js';

// The key fuzz_mlb_header's dump line ends with: the input's length and its FNV-1a 64 (hex).
function key(bytes) {
  let h = 0xcbf29ce484222325n;
  for (const c of bytes) h = BigInt.asUintN(64, (h ^ BigInt(c)) * 0x100000001b3n);
  return `${bytes.length} ${h.toString(16).padStart(16, '0')}`;
}

const [exe, ...dirs] = process.argv.slice(2);
const files = dirs.flatMap((d) => {
  try { return readdirSync(d).map((f) => join(d, f)).filter((f) => statSync(f).isFile()); } catch { return []; }
});
// Verdicts by content, not by order: libFuzzer runs an input twice when its leak check re-runs it
// (the first input, whose printf allocates stdout's buffer), so the n-th line is not the n-th
// file's. -detect_leaks=0 avoids those re-runs; the key makes the pairing independent of them.
const verdicts = new Map();
for (let i = 0; i < files.length; i += 200) {
  const batch = files.slice(i, i + 200);
  const r = spawnSync(exe, ['-detect_leaks=0', ...batch], {
    env: { ...process.env, ML_FUZZ_HEADER_DUMP: '1' }, stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 1 << 28,
  });
  if (r.status !== 0) console.log(`${exe} exited with ${r.status ?? r.signal} on a batch: ${r.stderr.toString().slice(-2000)}`);
  for (const line of r.stdout.toString().split('\n')) {
    const f = line.split(' ');
    if (f.length === 7) verdicts.set(`${f[5]} ${f[6]}`, f.slice(0, 5));
  }
}
let bad = 0, accepted = 0;
for (const f of files) {
  const bytes = readFileSync(f);
  const [verdict, fileSize, dim, layers, vocab] = verdicts.get(key(bytes)) ?? ['missing'];
  let js;
  try { js = parseHeader(bytes); } catch (e) { js = { error: e.message }; }
  const jsMlb = js.kind === 'mlb';
  if (verdict === 'accept') {
    accepted++;
    const same = jsMlb && js.dim === +dim && js.nLayers === +layers && js.vocabSize === +vocab && js.fileSize === +fileSize;
    if (!same) { bad++; console.log(`${f}: C++ accepts (dim ${dim}, ${layers} layers, vocab ${vocab}, ${fileSize} bytes), header.js says ${JSON.stringify(js)}`); }
  } else if (verdict !== 'reject') {
    bad++; console.log(`${f}: no C++ verdict`);
  }
}
console.log(`header.js vs ml_mlb_parse: ${files.length} inputs, ${accepted} accepted by C++, ${bad} disagreements`);
process.exit(bad ? 1 : 0);
