// Assembles Hugging Face tokenizer.json files from the raw vocabularies in the shared data folder
// (none of these tokenizer.json files could be downloaded; see ../../../shared/data/tokenizers/SOURCES.md)
// and trains two more with the `tokenizers` package itself. Output goes to e2e/hf/build/ (ignored by
// git: everything here is derived from shared/ and is regenerated when this script is newer).
//
//   llama3.json   Llama 3.2: encoder.json (vocab) + vocab.bpe (merges, "a b" strings), Llama 3's
//                 Split regex + ByteLevel(use_regex false), ignore_merges, 256 special tokens,
//                 TemplateProcessing(<|begin_of_text|> $A), ByteLevel decoder.
//   qwen2.json    Qwen2: qwen.tiktoken ranks -> vocab + merges (the tiktoken->HF converter's way:
//                 every split of a token into two vocab tokens, ordered by the token's rank, then by
//                 the ranks of the halves), NFC, Qwen2's regex, merges as [a, b] arrays, the
//                 Qwen2.5 added tokens (from qwen2.5-0.5b-instruct/tokenizer_config.json).
//   gpt2.json     GPT-2: tokens and merges read out of ggml-vocab-gpt-2.gguf, ByteLevel(use_regex true).
//   llama2.json   Llama 2 (legacy HF LlamaTokenizerFast layout): pieces + scores from the llama2.c
//                 tokenizer.bin, merges as transformers' SentencePieceExtractor derives them,
//                 Prepend/Replace normalizer, byte_fallback, <s> post-processor.
//   trained-bl.json   byte-level BPE trained by tokenizers' BpeTrainer on corpus text, then given the
//                     full 256-byte alphabet, a ByteLevel decoder and <|endoftext|>/<|im_start|>/<|im_end|>.
//   trained-spm.json  SentencePiece-style BPE trained by BpeTrainer (Metaspace pre-tokenizer,
//                     prepend_scheme first, split false), then byte_fallback with <0x00>..<0xFF>,
//                     <unk>/<s>/</s>, and the Replace/ByteFallback/Fuse/Strip decoder.
//
// Usage: node assemble.mjs   (prints the paths); import { ensureTokenizers } for tests.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const here = path.dirname(fileURLToPath(import.meta.url));
export const SHARED = process.env.KRAFLA_SHARED || path.resolve(here, '../../../shared');
export const BUILD = process.env.KRAFLA_HF_WORK || path.join(here, 'build');

// GPT-2's byte -> printable character table.
export function bytesToUnicode() {
  const bs = [];
  for (let b = 33; b <= 126; b++) bs.push(b);
  for (let b = 161; b <= 172; b++) bs.push(b);
  for (let b = 174; b <= 255; b++) bs.push(b);
  const cs = bs.slice();
  let n = 0;
  for (let b = 0; b < 256; b++) {
    if (!bs.includes(b)) { bs.push(b); cs.push(256 + n); n++; }
  }
  const table = new Array(256);
  for (let i = 0; i < 256; i++) table[bs[i]] = String.fromCodePoint(cs[i]);
  return table;
}
const B2U = bytesToUnicode();
const bytesToStr = (buf) => { let s = ''; for (const b of buf) s += B2U[b]; return s; };

const added = (id, content, special = true, extra = {}) => ({
  id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special, ...extra,
});

const LLAMA3_RE = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const QWEN2_RE = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

const bpeModel = (vocab, merges, opts = {}) => ({
  type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
  fuse_unk: false, byte_fallback: false, ignore_merges: false, ...opts, vocab, merges,
});
const byteLevel = (add_prefix_space, trim_offsets, use_regex) => ({ type: 'ByteLevel', add_prefix_space, trim_offsets, use_regex });

// Llama 3.1/3.2 special token names (HF Meta-Llama-3.2 tokenizer.json): 128000..128255.
export function llama3Specials() {
  const named = ['<|begin_of_text|>', '<|end_of_text|>', '<|reserved_special_token_0|>', '<|reserved_special_token_1|>',
    '<|finetune_right_pad_id|>', '<|reserved_special_token_2|>', '<|start_header_id|>', '<|end_header_id|>',
    '<|eom_id|>', '<|eot_id|>', '<|python_tag|>'];
  const out = named.slice();
  for (let i = 3; out.length < 256; i++) out.push(`<|reserved_special_token_${i}|>`);
  return out;
}

function buildLlama3() {
  const dir = path.join(SHARED, 'data/tokenizers/llama3.2-ollama');
  const vocab = JSON.parse(fs.readFileSync(path.join(dir, 'encoder.json'), 'utf8'));
  const merges = fs.readFileSync(path.join(dir, 'vocab.bpe'), 'utf8').split('\n').filter((l) => l && !l.startsWith('#version'));
  const specials = llama3Specials();
  return {
    version: '1.0', truncation: null, padding: null,
    added_tokens: specials.map((s, i) => added(128000 + i, s)),
    normalizer: null,
    pre_tokenizer: { type: 'Sequence', pretokenizers: [
      { type: 'Split', pattern: { Regex: LLAMA3_RE }, behavior: 'Isolated', invert: false },
      byteLevel(false, true, false)] },
    post_processor: { type: 'Sequence', processors: [
      byteLevel(true, false, true),
      { type: 'TemplateProcessing',
        single: [{ SpecialToken: { id: '<|begin_of_text|>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
        pair: [{ SpecialToken: { id: '<|begin_of_text|>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } },
          { SpecialToken: { id: '<|begin_of_text|>', type_id: 1 } }, { Sequence: { id: 'B', type_id: 1 } }],
        special_tokens: { '<|begin_of_text|>': { id: '<|begin_of_text|>', ids: [128000], tokens: ['<|begin_of_text|>'] } } }] },
    decoder: byteLevel(true, true, true),
    model: bpeModel(vocab, merges, { ignore_merges: true }),
  };
}

// tiktoken ranks (Map latin1-bytes-string -> rank) -> HF vocab + merges, as transformers' TikTokenConverter.
function tiktokenToHf(ranks) {
  const vocab = {};
  const merges = [];
  for (const [tok, rank] of ranks) {
    vocab[bytesToStr(Buffer.from(tok, 'latin1'))] = rank;
    if (tok.length === 1) continue;
    const local = [];
    for (let i = 1; i < tok.length; i++) {
      const l = tok.slice(0, i), r = tok.slice(i);
      if (ranks.has(l) && ranks.has(r)) local.push([l, r, rank]);
    }
    local.sort((a, b) => ranks.get(a[0]) - ranks.get(b[0]) || ranks.get(a[1]) - ranks.get(b[1]));
    for (const m of local) merges.push(m);
  }
  merges.sort((a, b) => a[2] - b[2]); // stable: keeps the per-token order
  return { vocab, merges: merges.map(([l, r]) => [bytesToStr(Buffer.from(l, 'latin1')), bytesToStr(Buffer.from(r, 'latin1'))]) };
}

function buildQwen2() {
  const ranks = new Map();
  for (const line of fs.readFileSync(path.join(SHARED, 'data/tokenizers/qwen/qwen.tiktoken'), 'utf8').split('\n')) {
    if (!line) continue;
    const [b64, rank] = line.split(' ');
    ranks.set(Buffer.from(b64, 'base64').toString('latin1'), Number(rank));
  }
  const { vocab, merges } = tiktokenToHf(ranks);
  const cfg = JSON.parse(fs.readFileSync(path.join(SHARED, 'data/hf/qwen2.5-0.5b-instruct/tokenizer_config.json'), 'utf8'));
  const addedTokens = Object.entries(cfg.added_tokens_decoder).map(([id, t]) => ({
    id: Number(id), content: t.content, single_word: t.single_word, lstrip: t.lstrip, rstrip: t.rstrip,
    normalized: t.normalized, special: t.special }));
  return {
    version: '1.0', truncation: null, padding: null, added_tokens: addedTokens,
    normalizer: { type: 'NFC' },
    pre_tokenizer: { type: 'Sequence', pretokenizers: [
      { type: 'Split', pattern: { Regex: QWEN2_RE }, behavior: 'Isolated', invert: false },
      byteLevel(false, false, false)] },
    post_processor: byteLevel(false, false, false),
    decoder: byteLevel(false, false, false),
    model: bpeModel(vocab, merges),
  };
}

// Minimal GGUF reader: returns the metadata key/values (arrays of strings and scalars).
export function readGgufMeta(file) {
  const b = fs.readFileSync(file);
  if (b.toString('latin1', 0, 4) !== 'GGUF') throw new Error(`${file}: not GGUF`);
  let o = 4;
  const u32 = () => { const v = b.readUInt32LE(o); o += 4; return v; };
  const u64 = () => { const v = Number(b.readBigUInt64LE(o)); o += 8; return v; };
  const str = () => { const n = u64(); const s = b.toString('utf8', o, o + n); o += n; return s; };
  const sizes = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
  const val = (t) => {
    if (t === 8) return str();
    if (t === 9) { const et = u32(); const n = u64(); const a = new Array(n); for (let i = 0; i < n; i++) a[i] = val(et); return a; }
    const sz = sizes[t]; if (!sz) throw new Error(`gguf type ${t}`);
    let v;
    if (t === 4) v = b.readUInt32LE(o); else if (t === 5) v = b.readInt32LE(o); else if (t === 6) v = b.readFloatLE(o);
    else if (t === 10) v = Number(b.readBigUInt64LE(o)); else if (t === 7 || t === 0) v = b[o]; else v = null;
    o += sz; return v;
  };
  u32(); u64(); const nkv = u64();
  const meta = {};
  for (let i = 0; i < nkv; i++) { const k = str(); meta[k] = val(u32()); }
  return meta;
}

function buildGpt2() {
  const m = readGgufMeta(path.join(SHARED, 'data/tokenizer-vectors/ggml-vocab-gpt-2.gguf'));
  const toks = m['tokenizer.ggml.tokens'];
  const vocab = {};
  toks.forEach((t, i) => { vocab[t] = i; });
  const eot = toks.indexOf('<|endoftext|>');
  return {
    version: '1.0', truncation: null, padding: null,
    added_tokens: [added(eot, '<|endoftext|>', true, { normalized: true })],
    normalizer: null,
    pre_tokenizer: byteLevel(false, true, true),
    post_processor: byteLevel(true, false, true),
    decoder: byteLevel(true, true, true),
    model: bpeModel(vocab, m['tokenizer.ggml.merges']),
  };
}

// llama2.c tokenizer.bin: int32 max_len, then per token: f32 score, i32 len, bytes (▁ written as ' ').
export function readLlama2cTokenizer(file, nVocab = 32000) {
  const b = fs.readFileSync(file);
  let o = 4;
  const pieces = [];
  for (let i = 0; i < nVocab && o < b.length; i++) {
    const score = b.readFloatLE(o); const n = b.readInt32LE(o + 4);
    pieces.push({ piece: b.toString('utf8', o + 8, o + 8 + n), score }); o += 8 + n;
  }
  return pieces;
}

function buildLlama2() {
  const pieces = readLlama2cTokenizer(path.join(SHARED, 'models/tokenizer.bin'));
  const vocab = {};
  const scores = [];
  pieces.forEach(({ piece, score }, i) => {
    let p = piece.replaceAll(' ', '\u2581');
    if (i === 0) p = '<unk>'; else if (i === 1) p = '<s>'; else if (i === 2) p = '</s>';
    vocab[p] = i; scores.push([p, score]);
  });
  // transformers SentencePieceExtractor.extract(vocab_scores): reverse=True (highest score first).
  const merges = [];
  for (const [p, score] of scores) {
    const cps = Array.from(p);
    const local = [];
    for (let i = 1; i < cps.length; i++) {
      const l = cps.slice(0, i).join(''), r = cps.slice(i).join('');
      if (l in vocab && r in vocab) local.push([l, r, score]);
    }
    local.sort((a, c) => vocab[a[0]] - vocab[c[0]] || vocab[a[1]] - vocab[c[1]]);
    merges.push(...local);
  }
  merges.sort((a, c) => c[2] - a[2]);
  return {
    version: '1.0', truncation: null, padding: null,
    added_tokens: [added(0, '<unk>'), added(1, '<s>'), added(2, '</s>')],
    normalizer: { type: 'Sequence', normalizers: [{ type: 'Prepend', prepend: '\u2581' },
      { type: 'Replace', pattern: { String: ' ' }, content: '\u2581' }] },
    pre_tokenizer: null,
    post_processor: { type: 'TemplateProcessing',
      single: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
      pair: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } },
        { SpecialToken: { id: '<s>', type_id: 1 } }, { Sequence: { id: 'B', type_id: 1 } }],
      special_tokens: { '<s>': { id: '<s>', ids: [1], tokens: ['<s>'] } } },
    decoder: spmDecoder(),
    model: bpeModel(vocab, merges.map(([l, r]) => `${l} ${r}`), { unk_token: '<unk>', fuse_unk: true, byte_fallback: true }),
  };
}

function spmDecoder() {
  return { type: 'Sequence', decoders: [{ type: 'Replace', pattern: { String: '\u2581' }, content: ' ' },
    { type: 'ByteFallback' }, { type: 'Fuse' }, { type: 'Strip', content: ' ', start: 1, stop: 0 }] };
}

// Training text: the fixed corpus (minus the huge repeats) and some prose, repeated a little.
async function trainingText() {
  const { fixedCorpus, englishProse } = await import('./corpus.mjs');
  return fixedCorpus().filter((s) => s.length < 5000).join('\n') + '\n' + englishProse(20000);
}

function train(setup, file, text) {
  const { Tokenizer, BPE } = require('tokenizers');
  fs.writeFileSync(`${file}.txt`, text);
  const tok = new Tokenizer(BPE.empty());
  setup(tok);
  tok.train([`${file}.txt`]);
  tok.save(file, false);
  return JSON.parse(fs.readFileSync(file, 'utf8'));
}

async function buildTrainedByteLevel(file) {
  const t = require('tokenizers');
  const j = train((tok) => tok.setPreTokenizer(t.byteLevelPreTokenizer(false, true)), file, await trainingText());
  const vocab = j.model.vocab;
  let next = Math.max(...Object.values(vocab)) + 1;
  for (const c of B2U) if (!(c in vocab)) vocab[c] = next++;
  j.added_tokens = ['<|endoftext|>', '<|im_start|>', '<|im_end|>'].map((s, i) => added(next + i, s));
  j.decoder = byteLevel(true, true, true);
  j.post_processor = byteLevel(true, false, true);
  return j;
}

async function buildTrainedSpm(file) {
  const t = require('tokenizers');
  const j = train((tok) => tok.setPreTokenizer(t.metaspacePreTokenizer('\u2581', 'first', false)), file, await trainingText());
  // Ids: <unk> <s> </s>, <0x00>..<0xFF>, then the trained vocabulary in its order.
  const old = Object.entries(j.model.vocab).sort((a, b) => a[1] - b[1]).map(([k]) => k);
  const vocab = { '<unk>': 0, '<s>': 1, '</s>': 2 };
  for (let b = 0; b < 256; b++) vocab[`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`] = 3 + b;
  let next = 259;
  for (const k of old) if (!(k in vocab)) vocab[k] = next++;
  j.model = { ...j.model, vocab, unk_token: '<unk>', fuse_unk: true, byte_fallback: true };
  j.added_tokens = [added(0, '<unk>'), added(1, '<s>'), added(2, '</s>')];
  j.decoder = spmDecoder();
  j.post_processor = { type: 'TemplateProcessing',
    single: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
    pair: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } },
      { SpecialToken: { id: '</s>', type_id: 1 } }, { Sequence: { id: 'B', type_id: 1 } }, { SpecialToken: { id: '</s>', type_id: 1 } }],
    special_tokens: { '<s>': { id: '<s>', ids: [1], tokens: ['<s>'] }, '</s>': { id: '</s>', ids: [2], tokens: ['</s>'] } } };
  return j;
}

const BUILDERS = {
  llama3: buildLlama3, qwen2: buildQwen2, gpt2: buildGpt2, llama2: buildLlama2,
  'trained-bl': buildTrainedByteLevel, 'trained-spm': buildTrainedSpm,
};

// Builds what is missing or older than this script or corpus.mjs; returns { name: path }.
export async function ensureTokenizers(names = Object.keys(BUILDERS)) {
  fs.mkdirSync(BUILD, { recursive: true });
  const newest = Math.max(...['assemble.mjs', 'corpus.mjs'].map((f) => fs.statSync(path.join(here, f)).mtimeMs));
  const out = {};
  for (const name of names) {
    const file = path.join(BUILD, `${name}.json`);
    if (!fs.existsSync(file) || fs.statSync(file).mtimeMs < newest) {
      const j = await BUILDERS[name](file);
      fs.writeFileSync(`${file}.tmp`, JSON.stringify(j));
      fs.renameSync(`${file}.tmp`, file);
    }
    out[name] = file;
  }
  return out;
}

// The real tokenizer.json files shipped in shared/.
export const REAL = {
  smollm2: path.join(SHARED, 'data/hf/smollm2-135m-instruct/tokenizer.json'),
  tinystories: path.join(SHARED, 'models/tinystories-656k-hf/tokenizer.json'),
};

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const t0 = Date.now();
  const paths = await ensureTokenizers(process.argv.slice(2).length ? process.argv.slice(2) : undefined);
  for (const [k, v] of Object.entries(paths)) console.log(`${k}\t${v}\t${fs.statSync(v).size} B`);
  console.log(`${Date.now() - t0} ms`);
}
