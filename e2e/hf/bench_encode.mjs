// Encoding speed of krafla against Hugging Face's Rust library, in one run on one machine (not a
// test; docs/benchmarks.md, "Tokenizers").
//   KRAFLA_BENCH=build/native/bin/ml_bench node e2e/hf/bench_encode.mjs [name ...]
//     krafla's time is ml_bench --tokenizer FILE --encode TEXT (in-process, best of 3): preferred.
//   KRAFLA_TOK=build/native/bin/ml_tok node e2e/hf/bench_encode.mjs [name ...]
//     without KRAFLA_BENCH: the CLI's time on the text minus its time on an empty text (below).
// For each tokenizer: the corpus (fixed + random strings, joined) and ~1 MB of English prose.
// The Rust library: tokenizer.encode in-process, best of 3. krafla: there is no `bench` subcommand,
// so its time is (CLI on the text via stdin) - (CLI on an empty text), best of 3 each, i.e. the
// load time is subtracted. A proposed interface that would remove that noise:
//   $KRAFLA_TOK FILE bench [--repeat N] -   prints "bytes tokens seconds" for N encodes of stdin.
import { ensureTokenizers, REAL } from './assemble.mjs';
import { fixedCorpus, randomStrings, englishProse } from './corpus.mjs';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Tokenizer, KRAFLA_TOK, runTok } from './lib.mjs';

const KRAFLA_BENCH = process.env.KRAFLA_BENCH || '';
// ml_bench's best seconds for one whole-text encode (its Markdown row: | text | bytes | tokens | best ms | ...).
function mlBench(file, text) {
  const tmp = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'krafla-bench-')), 'text.txt');
  fs.writeFileSync(tmp, text);
  const out = execFileSync(KRAFLA_BENCH, ['--tokenizer', file, '--encode', tmp, '--runs', '3'], { encoding: 'utf8', maxBuffer: 1 << 24 });
  fs.rmSync(path.dirname(tmp), { recursive: true });
  const row = out.split('\n').find((l) => l.startsWith('| text.txt |'));
  return Number(row.split('|')[4]) / 1000;
}

const files = { ...REAL, ...(await ensureTokenizers()) };
const names = process.argv.slice(2).length ? process.argv.slice(2) : Object.keys(files);
const texts = {
  corpus: [...fixedCorpus(), ...randomStrings(200).map((x) => x.text)].join('\n'),
  'english 1 MB': englishProse(1 << 20),
};
const best = async (n, f) => { let b = Infinity; for (let i = 0; i < n; i++) { const t0 = process.hrtime.bigint(); await f(); b = Math.min(b, Number(process.hrtime.bigint() - t0) / 1e9); } return b; };
const fmt = (x) => (Number.isFinite(x) ? x.toFixed(2).padStart(8) : '     n/a');

console.log(`${'tokenizer'.padEnd(12)} ${'text'.padEnd(13)} ${'MB'.padStart(6)} ${'tokens'.padStart(8)}  HF MB/s  krafla MB/s  krafla/HF  (krafla load s)`);
for (const name of names) {
  const hf = Tokenizer.fromFile(files[name]);
  for (const [label, text] of Object.entries(texts)) {
    const mb = Buffer.byteLength(text) / 1e6;
    let ntok = 0;
    const hfS = await best(3, async () => { ntok = (await hf.encode(text, null, { addSpecialTokens: false })).getIds().length; });
    let kS = NaN, load = NaN;
    if (KRAFLA_BENCH) {
      kS = mlBench(files[name], text);
    } else if (KRAFLA_TOK) {
      let bad = null;
      load = await best(3, async () => { const r = await runTok([files[name], 'encode', '-'], ''); if (r.code) bad = r.stderr; });
      const full = await best(3, async () => { const r = await runTok([files[name], 'encode', '-'], text, { timeoutMs: 300000 }); if (r.code) bad = r.stderr; });
      kS = bad ? NaN : Math.max(full - load, 1e-6);
      if (bad) console.log(`  krafla failed: ${bad.trim().slice(0, 200)}`);
    }
    const hfR = mb / hfS, kR = mb / kS;
    console.log(`${name.padEnd(12)} ${label.padEnd(13)} ${mb.toFixed(2).padStart(6)} ${String(ntok).padStart(8)} ${fmt(hfR)} ${fmt(kR)}     ${fmt(kR / hfR)}  ${fmt(load)}`);
  }
}
