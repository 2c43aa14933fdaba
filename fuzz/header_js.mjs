// Compares web/src/header.js's parseHeader with the C++ validator (ml_mlb_parse) on the mlb_header
// corpus: the committed seeds and what fuzzing grew (build/asan/fuzz-work/mlb_header/corpus).
//   node fuzz/header_js.mjs BUILD/bin/fuzz_mlb_header DIR...
// header.js sees only the first 256 bytes, so the two cannot agree on everything; what must hold:
//   - a file the C++ validator accepts, header.js accepts as 'mlb' with the same dim, layer count,
//     vocabulary and file size;
//   (so a file header.js refuses as a .mlb, the C++ validator refuses too). A file the validator
//   refuses, header.js may accept: it cannot see the directory or the file's length.
// Exits 1 on a disagreement, naming the file.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { parseHeader } from '../web/src/header.js';

const [exe, ...dirs] = process.argv.slice(2);
const files = dirs.flatMap((d) => {
  try { return readdirSync(d).map((f) => join(d, f)).filter((f) => statSync(f).isFile()); } catch { return []; }
});
const verdicts = new Map();
for (let i = 0; i < files.length; i += 200) {
  const batch = files.slice(i, i + 200);
  const out = execFileSync(exe, batch, { env: { ...process.env, ML_FUZZ_HEADER_DUMP: '1' }, stdio: ['ignore', 'pipe', 'ignore'] });
  out.toString().trim().split('\n').forEach((line, k) => verdicts.set(batch[k], line.split(' ')));
}
let bad = 0, accepted = 0;
for (const f of files) {
  const [verdict, fileSize, dim, layers, vocab] = verdicts.get(f) ?? ['missing'];
  let js;
  try { js = parseHeader(readFileSync(f)); } catch (e) { js = { error: e.message }; }
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
