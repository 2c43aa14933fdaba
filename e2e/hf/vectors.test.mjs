// llama.cpp's tokenizer test vectors (shared/data/tokenizer-vectors, see its SOURCES.md): .inp
// strings and .out ids made by Hugging Face AutoTokenizer.encode(text, add_special_tokens=False).
// First the Rust library itself must reproduce the .out ids with the tokenizer.json files that
// assemble.mjs builds (this validates the assembly), then krafla ($KRAFLA_TOK) must, with the same
// files and (llama-spm) with the llama2.c tokenizer.bin.
//   KRAFLA_TOK=build/scalar/bin/hf_tok_driver node --test e2e/hf/vectors.test.mjs
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { ensureTokenizers, SHARED } from './assemble.mjs';
import { Tokenizer, KRAFLA_TOK, CONCURRENCY, pool, kraflaEncode, kraflaBatch, supportsBatch, diffReport, parseIds } from './lib.mjs';

const VEC = path.join(SHARED, 'data/tokenizer-vectors');
const files = await ensureTokenizers(['llama3', 'qwen2', 'gpt2', 'llama2']);
const TOKENIZER_BIN = path.join(SHARED, 'models/tokenizer.bin');

// vector set -> tokenizer files to check it with (hf: whether the Rust library can read it).
const SETS = [
  ['llama-bpe', [{ file: files.llama3, hf: true }]],
  ['qwen2', [{ file: files.qwen2, hf: true }]],
  ['deepseek-r1-qwen', [{ file: files.qwen2, hf: true }]],
  ['gpt-2', [{ file: files.gpt2, hf: true }]],
  ['llama-spm', [{ file: files.llama2, hf: true }, { file: TOKENIZER_BIN, hf: false }]],
  // Not with tokenizer.bin: llama2.c's format has no added tokens, so "</s>" in text is text there
  // (run.c's encode), where Hugging Face cuts it out as EOS -- 7 of tinyllama's 11 strings.
  ['tinyllama', [{ file: files.llama2, hf: true }]],
];

function readVectors(name) {
  const inp = fs.readFileSync(path.join(VEC, `ggml-vocab-${name}.gguf.inp`), 'utf8').split('\n__ggml_vocab_test__\n');
  inp.pop();
  const out = fs.readFileSync(path.join(VEC, `ggml-vocab-${name}.gguf.out`), 'utf8').split('\n').slice(0, inp.length).map(parseIds);
  assert.equal(out.length, inp.length, `${name}: as many .out lines as .inp strings`);
  return inp.map((text, i) => ({ text, ids: out[i] }));
}

const report = (name, vecs, got) => {
  const fails = [];
  vecs.forEach((v, i) => {
    if (got[i] === null) fails.push(`${name} #${i}: failed: text ${JSON.stringify(v.text)}`);
    else if (JSON.stringify(got[i]) !== JSON.stringify(v.ids)) fails.push(diffReport(`${name} #${i}`, v.text, v.ids, got[i]));
  });
  return fails;
};

for (const [name, toks] of SETS) {
  const vecs = readVectors(name);
  for (const { file, hf } of toks.filter((x) => x.hf)) {
    test(`Rust tokenizers reproduces ${name}.out with ${path.basename(file)}`, async (t) => {
      const tok = Tokenizer.fromFile(file);
      const got = [];
      for (const v of vecs) got.push((await tok.encode(v.text, null, { addSpecialTokens: false })).getIds());
      const fails = report(name, vecs, got);
      t.diagnostic(`${vecs.length - fails.length}/${vecs.length}`);
      assert.ok(fails.length === 0, fails.join('\n'));
    });
  }
  for (const { file } of toks) {
    test(`krafla reproduces ${name}.out with ${path.basename(file)}`, { skip: KRAFLA_TOK ? false : 'KRAFLA_TOK is not set' }, async (t) => {
      let got;
      const errors = [];
      if (!process.env.KRAFLA_HF_NO_BATCH && (await supportsBatch(file))) {
        const r = await kraflaBatch(file, vecs.map((v) => ['encode', false, v.text]));
        assert.ok(r.replies, `batch failed: exit ${r.code} ${r.stderr}`);
        got = r.replies.map((x) => x.ids ?? null);
      } else {
        got = await pool(vecs, CONCURRENCY, async (v) => {
          const r = await kraflaEncode(file, v.text, false);
          if (!r.ids) errors.push(`exit ${r.code} ${r.signal ?? ''} ${r.stderr.trim()}`);
          return r.ids;
        });
      }
      const fails = report(name, vecs, got);
      t.diagnostic(`${vecs.length - fails.length}/${vecs.length}`);
      assert.ok(fails.length === 0, `${fails.length} of ${vecs.length} differ:\n${fails.slice(0, 10).join('\n')}` +
        (errors.length ? `\nfirst error: ${errors[0]}` : ''));
    });
  }
}
