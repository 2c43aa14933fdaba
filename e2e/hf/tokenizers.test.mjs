// krafla's tokenizer.json tokenizers against Hugging Face's `tokenizers` (Rust, npm 0.23.2), string
// by string: encode ids with and without add_special, decode of krafla's own ids (so
// decode(encode(x))) in both skip_special modes, decode of seeded random id sequences, and the
// byte offsets of each token. Tokenizers: two real tokenizer.json files from shared/, four assembled
// by assemble.mjs (Llama 3, Qwen2, GPT-2, Llama 2) and two trained here by BpeTrainer.
//
// Run (from the repository root):
//   KRAFLA_TOK=build/scalar/bin/hf_tok_driver node --test e2e/hf/tokenizers.test.mjs
//   KRAFLA_TOK=e2e/hf/fake_tok.mjs node --test e2e/hf/tokenizers.test.mjs   (the harness itself)
// Modes: when `$KRAFLA_TOK FILE batch` answers (see lib.mjs), all strings of one tokenizer go
// through one process; otherwise one process per string and call, on KRAFLA_HF_STRINGS strings per
// tokenizer (default 20, spread over the corpus; "all" for everything; offsets on every
// items/KRAFLA_HF_OFFSETS-th of them, default 8), KRAFLA_HF_JOBS at a time.
// KRAFLA_HF_NO_BATCH=1 forces the per-process mode; KRAFLA_HF_RANDOM sets the number of random
// strings (default 200), KRAFLA_HF_SEED their base seed; KRAFLA_HF_ONLY=name,name picks tokenizers.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ensureTokenizers, REAL } from './assemble.mjs';
import { fixedCorpus, randomStrings, prng, RANDOM_SEED } from './corpus.mjs';
import {
  Tokenizer, KRAFLA_TOK, CONCURRENCY, pool, kraflaEncode, kraflaDecode, kraflaOffsets, kraflaBatch, supportsBatch,
  hfEncode, diffReport, textDiffReport,
} from './lib.mjs';

const NRANDOM = Number(process.env.KRAFLA_HF_RANDOM ?? 200);
const MAX_REPORTS = 12;

function corpus() {
  const fixed = fixedCorpus().map((text, i) => ({ label: `fixed[${i}]`, text }));
  const rnd = randomStrings(NRANDOM).map(({ seed, text }) => ({ label: `random seed ${seed}`, text }));
  return [...fixed, ...rnd];
}

// In per-process mode: n items spread over the list (always the first few edge cases).
function spread(items, n) {
  if (n >= items.length) return items;
  const out = [];
  for (let i = 0; i < n; i++) out.push(items[Math.floor((i * items.length) / n)]);
  return out;
}

// Seeded random id sequences over the whole id range, a fifth of them special ids.
function randomIdSeqs(tok, count, seed) {
  const r = prng(seed);
  const vocab = tok.getVocabSize(true);
  const specials = Object.values(tok.getVocab(true)).filter((id) => id >= tok.getVocabSize(false));
  const seqs = [];
  for (let s = 0; s < count; s++) {
    const n = 1 + Math.floor(r() * 20);
    const ids = [];
    for (let i = 0; i < n; i++) {
      ids.push(specials.length && r() < 0.2 ? specials[Math.floor(r() * specials.length)] : Math.floor(r() * vocab));
    }
    seqs.push(ids);
  }
  return seqs;
}

const files = { ...REAL, ...(await ensureTokenizers()) };
const only = process.env.KRAFLA_HF_ONLY ? process.env.KRAFLA_HF_ONLY.split(',') : null;
const names = Object.keys(files).filter((n) => !only || only.includes(n));
const skip = KRAFLA_TOK ? false : 'KRAFLA_TOK is not set (a path to krafla\'s driver, or e2e/hf/fake_tok.mjs)';
const batch = !skip && !process.env.KRAFLA_HF_NO_BATCH && (await supportsBatch(files[names[0]]));
const perProcStrings = process.env.KRAFLA_HF_STRINGS === 'all' ? Infinity : Number(process.env.KRAFLA_HF_STRINGS || 20);
const perProcOffsets = Number(process.env.KRAFLA_HF_OFFSETS ?? 8);

for (const name of names) {
  const file = files[name];
  test(`${name} (${file})`, { skip }, async (t) => {
    const hf = Tokenizer.fromFile(file);
    const items = batch ? corpus() : spread(corpus(), perProcStrings);
    const idSeqs = randomIdSeqs(hf, batch ? 50 : 5, RANDOM_SEED);
    t.diagnostic(`${batch ? 'batch' : 'per-process'} mode, ${items.length} strings, ${idSeqs.length} random id sequences`);

    // Oracle.
    const want = [];
    for (const it of items) want.push({ plain: await hfEncode(hf, it.text, false), special: await hfEncode(hf, it.text, true) });

    // krafla: encodes.
    let got;
    if (batch) {
      const reqs = items.flatMap((it) => [['encode', false, it.text], ['encode', true, it.text]]);
      const r = await kraflaBatch(file, reqs);
      assert.ok(r.replies, `batch encode failed: exit ${r.code} ${r.signal ?? ''} ${r.stderr}`);
      assert.equal(r.replies.length, reqs.length, 'batch: one reply per request');
      got = items.map((_, i) => ({ plain: r.replies[2 * i], special: r.replies[2 * i + 1] }));
    } else {
      got = await pool(items, CONCURRENCY, async (it, i) => {
        const [p, s, o] = [await kraflaEncode(file, it.text, false), await kraflaEncode(file, it.text, true),
          i % Math.ceil(items.length / perProcOffsets) === 0 ? await kraflaOffsets(file, it.text) : {}];
        const err = (r) => `exit ${r.code} ${r.signal ?? ''} ${r.stderr.trim()}`;
        return {
          plain: p.ids ? { ids: p.ids, offsets: o.toks?.map((x) => [x.begin, x.end]), pieces: o.toks?.map((x) => x.piece) } : { error: err(p) },
          special: s.ids ? { ids: s.ids } : { error: err(s) },
        };
      });
    }

    await t.test('encode ids (add_special false and true)', () => {
      const fails = [];
      let pass = 0;
      items.forEach((it, i) => {
        let ok = true;
        for (const mode of ['plain', 'special']) {
          const w = want[i][mode].ids, g = got[i][mode];
          if (g.error) { ok = false; fails.push(`${it.label} ${mode}: krafla failed: ${g.error}; text ${JSON.stringify(it.text).slice(0, 300)}`); continue; }
          if (JSON.stringify(w) !== JSON.stringify(g.ids)) { ok = false; fails.push(diffReport(`${it.label} add_special=${mode === 'special'}`, it.text, w, g.ids)); }
        }
        if (ok) pass++;
      });
      t.diagnostic(`encode: ${pass}/${items.length} strings equal`);
      assert.ok(fails.length === 0, `${fails.length} mismatches (${pass}/${items.length} strings equal):\n${fails.slice(0, MAX_REPORTS).join('\n')}`);
    });

    await t.test('token byte offsets and pieces (add_special false)', () => {
      const fails = [];
      let checked = 0;
      items.forEach((it, i) => {
        const w = want[i].plain, g = got[i].plain;
        if (!g.offsets || JSON.stringify(w.ids) !== JSON.stringify(g.ids)) return; // ids reported above
        checked++;
        if (JSON.stringify(w.offsets) !== JSON.stringify(g.offsets)) {
          const k = w.offsets.findIndex((o, j) => JSON.stringify(o) !== JSON.stringify(g.offsets[j]));
          fails.push(`${it.label}: text ${JSON.stringify(it.text).slice(0, 200)}\n  token ${k} (${JSON.stringify(w.tokens[k])}): hf bytes [${w.offsets[k]}], krafla [${g.offsets[k]}]`);
        } else if (g.pieces && JSON.stringify(w.tokens) !== JSON.stringify(g.pieces)) {
          fails.push(`${it.label}: pieces differ: hf ${JSON.stringify(w.tokens).slice(0, 300)} krafla ${JSON.stringify(g.pieces).slice(0, 300)}`);
        }
      });
      t.diagnostic(`offsets: ${checked - fails.length}/${checked} strings equal`);
      if (checked === 0) t.skip('krafla gave no offsets');
      assert.ok(fails.length === 0, `${fails.length} mismatches:\n${fails.slice(0, MAX_REPORTS).join('\n')}`);
    });

    // Decodes: krafla's own add_special ids (falling back to the oracle's where krafla failed),
    // then the random sequences; both skip modes.
    const seqs = [
      ...items.map((it, i) => ({ label: it.label, ids: got[i].special.ids ?? want[i].special.ids })),
      ...idSeqs.map((ids, k) => ({ label: `random ids #${k} (seed ${RANDOM_SEED})`, ids })),
    ];
    const wantText = [];
    for (const s of seqs) wantText.push([await hf.decode(s.ids, false), await hf.decode(s.ids, true)]);
    let gotText;
    if (batch) {
      const r = await kraflaBatch(file, seqs.flatMap((s) => [['decode', false, s.ids], ['decode', true, s.ids]]));
      assert.ok(r.replies, `batch decode failed: exit ${r.code} ${r.signal ?? ''} ${r.stderr}`);
      gotText = seqs.map((_, i) => [r.replies[2 * i], r.replies[2 * i + 1]].map((x) => x.text ?? { error: x.error }));
    } else {
      gotText = await pool(seqs, CONCURRENCY, async (s) => Promise.all([false, true].map(async (skipSpecial) => {
        const r = await kraflaDecode(file, s.ids, skipSpecial);
        return r.text ?? { error: `exit ${r.code} ${r.signal ?? ''} ${r.stderr.trim()}` };
      })));
    }
    await t.test('decode (skip_special false and true), decode(encode(x))', () => {
      const fails = [];
      let pass = 0;
      seqs.forEach((s, i) => {
        let ok = true;
        [false, true].forEach((skipSpecial, m) => {
          const w = wantText[i][m], g = gotText[i][m];
          if (typeof g !== 'string') { ok = false; fails.push(`${s.label} skip_special=${skipSpecial}: krafla failed: ${g.error}; ids [${s.ids.join(' ').slice(0, 300)}]`); }
          else if (w !== g) { ok = false; fails.push(textDiffReport(`${s.label} skip_special=${skipSpecial}`, s.ids, w, g)); }
        });
        if (ok) pass++;
      });
      t.diagnostic(`decode: ${pass}/${seqs.length} id sequences equal`);
      assert.ok(fails.length === 0, `${fails.length} mismatches (${pass}/${seqs.length} sequences equal):\n${fails.slice(0, MAX_REPORTS).join('\n')}`);
    });
  });
}
