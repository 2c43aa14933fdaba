#!/usr/bin/env node
// A stand-in for krafla's $KRAFLA_TOK that answers with Hugging Face's own library: it proves the
// harness can pass, and with KRAFLA_FAKE_BUG set it is deliberately wrong so the harness must fail:
//   KRAFLA_FAKE_BUG=encode   drops the last id of every encoding of 3+ ids that contains a digit
//   KRAFLA_FAKE_BUG=special  ignores --add-special
//   KRAFLA_FAKE_BUG=decode   decodes with a trailing-space strip
//   KRAFLA_FAKE_BUG=skip     ignores --skip-special
//   KRAFLA_FAKE_BUG=errors   exits 0 on invalid UTF-8 and 139 on a bad tokenizer.json
// Interface: the one in lib.mjs (encode, encode --offsets, decode, batch).
import fs from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { Tokenizer } = require('tokenizers');
const BUG = process.env.KRAFLA_FAKE_BUG || '';

const fail = (msg, code = 2) => { process.stderr.write(`fake_tok: ${msg}\n`); process.exit(code); };

// Byte offset of the first invalid UTF-8 sequence, or -1.
export function invalidUtf8At(b) {
  for (let i = 0; i < b.length;) {
    const c = b[i];
    let n, min;
    if (c < 0x80) { i++; continue; } else if (c >= 0xc2 && c <= 0xdf) { n = 1; min = 0x80; }
    else if (c >= 0xe0 && c <= 0xef) { n = 2; min = 0x800; } else if (c >= 0xf0 && c <= 0xf4) { n = 3; min = 0x10000; }
    else return i;
    if (i + n >= b.length) return i; // truncated sequence
    let cp = c & (0x3f >> n);
    for (let k = 1; k <= n; k++) {
      const d = b[i + k];
      if (d === undefined || (d & 0xc0) !== 0x80) return i;
      cp = (cp << 6) | (d & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
    i += n + 1;
  }
  return -1;
}

function charToByte(text, offsets) {
  const cps = Array.from(text);
  const at = [0];
  for (let i = 0; i < cps.length; i++) at.push(at[i] + Buffer.byteLength(cps[i]));
  return offsets.map(([b, e]) => [at[b], at[e]]);
}

async function encode(tok, text, addSpecial) {
  const e = await tok.encode(text, null, { addSpecialTokens: BUG === 'special' ? false : addSpecial });
  let ids = e.getIds();
  if (BUG === 'encode' && ids.length >= 3 && /[0-9]/.test(text)) ids = ids.slice(0, -1);
  return { ids, tokens: e.getTokens(), offsets: charToByte(text, e.getOffsets()) };
}

async function decode(tok, ids, skip, vocab) {
  for (const [i, id] of ids.entries()) {
    if (!Number.isInteger(id) || id < 0 || id >= vocab) throw new Error(`ids[${i}]: ${id} is out of range (vocabulary ${vocab})`);
  }
  let s = await tok.decode(ids, BUG === 'skip' ? false : skip);
  if (BUG === 'decode') s = s.replace(/ +$/, '');
  return s;
}

function textArg(arg) {
  const b = arg === '-' ? fs.readFileSync(0) : Buffer.from(arg, 'utf8');
  const bad = invalidUtf8At(b);
  if (bad >= 0) {
    if (BUG === 'errors') { process.stdout.write('\n'); process.exit(0); }
    fail(`invalid UTF-8 at byte offset ${bad}`);
  }
  return b.toString('utf8');
}

// krafla refuses what the Rust library may accept or report vaguely; the fake mimics that contract
// (message naming the field) so that errors.test.mjs can pass on it. Returns a message or null.
const MAX_FILE = 64 << 20;
function validate(file) {
  const size = fs.statSync(file).size;
  if (size > MAX_FILE) return `model.merges: the file is ${size} bytes, over the ${MAX_FILE}-byte limit`;
  const text = fs.readFileSync(file, 'utf8');
  let j;
  try { j = JSON.parse(text); } catch (e) { return `not JSON: ${e.message}`; }
  const dup = duplicateKey(text);
  if (dup) return `model.vocab: duplicate token ${JSON.stringify(dup)}`;
  const m = j?.model;
  if (!m || typeof m !== 'object' || Array.isArray(m)) return 'model: not an object';
  if (m.type !== 'BPE') return `model.type: ${JSON.stringify(m.type)} is not supported (only BPE)`;
  if (!m.vocab || typeof m.vocab !== 'object' || Array.isArray(m.vocab)) return 'model.vocab: not an object';
  if (!Array.isArray(m.merges)) return 'model.merges: not an array';
  const seen = new Map();
  for (const [k, id] of Object.entries(m.vocab)) {
    if (!Number.isInteger(id) || id < 0 || id >= 2 ** 31) return `model.vocab[${JSON.stringify(k)}]: id ${id} out of range`;
    if (seen.has(id)) return `model.vocab[${JSON.stringify(k)}]: id ${id} is also ${JSON.stringify(seen.get(id))}`;
    seen.set(id, k);
  }
  for (const [i, mg] of m.merges.entries()) {
    const pair = typeof mg === 'string' ? mg.split(' ') : mg;
    if (!Array.isArray(pair) || pair.length !== 2 || pair.some((x) => typeof x !== 'string')) return `model.merges[${i}]: not a pair`;
    for (const x of pair) if (!(x in m.vocab)) return `model.merges[${i}]: ${JSON.stringify(x)} is not in the vocabulary`;
  }
  if (j.added_tokens != null && !Array.isArray(j.added_tokens)) return 'added_tokens: not an array';
  for (const [i, a] of (j.added_tokens || []).entries()) {
    if (typeof a?.content !== 'string') return `added_tokens[${i}].content: not a string`;
    if (!Number.isInteger(a.id) || a.id < 0 || a.id >= 2 ** 31) return `added_tokens[${i}].id: ${a.id} out of range`;
  }
  for (const f of ['normalizer', 'pre_tokenizer', 'post_processor', 'decoder']) {
    if (j[f] != null && typeof j[f].type !== 'string') return `${f}.type: not a string`;
  }
  return null;
}

// The first key that appears twice in one JSON object (JSON.parse keeps the last silently).
function duplicateKey(text) {
  const stack = [];
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '"') {
      let j = i + 1;
      while (text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
      const s = text.slice(i, j + 1);
      let k = j + 1;
      while (' \t\r\n'.includes(text[k])) k++;
      const top = stack[stack.length - 1];
      if (text[k] === ':' && top instanceof Set) { if (top.has(s)) return JSON.parse(s); top.add(s); }
      i = j;
    } else if (c === '{') stack.push(new Set());
    else if (c === '[') stack.push(null);
    else if (c === '}' || c === ']') stack.pop();
  }
  return null;
}

async function main() {
  const [file, cmd, ...rest] = process.argv.slice(2);
  if (!file || !cmd) fail('usage: fake_tok FILE encode [--add-special|--offsets] TEXT | decode [--skip-special] IDS | batch');
  let bad;
  try { bad = validate(file.endsWith('.bin') ? new URL('build/llama2.json', import.meta.url).pathname : file); } catch (e) { fail(`${file}: ${e.message}`); }
  if (bad) { if (BUG === 'errors') process.exit(139); fail(`${file}: ${bad}`); }
  let tok;
  try {
    // llama2.c tokenizer.bin (krafla reads it too): the fake answers with the equivalent assembled
    // Llama 2 tokenizer.json (same vocabulary; see assemble.mjs).
    tok = Tokenizer.fromFile(file.endsWith('.bin') ? new URL('build/llama2.json', import.meta.url).pathname : file);
  } catch (e) {
    if (BUG === 'errors') process.exit(139);
    fail(`${file}: ${String(e.message || e).split('\n')[0]}`);
  }
  const vocab = tok.getVocabSize(true);
  const flags = rest.filter((a) => a.startsWith('--'));
  const args = rest.filter((a) => !a.startsWith('--') || a === '-');
  if (cmd === 'encode') {
    if (args.length !== 1) fail('encode: one TEXT argument');
    const text = textArg(args[0]);
    if (flags.includes('--offsets')) {
      const r = await encode(tok, text, false);
      process.stdout.write(r.ids.map((id, i) => `${id}\t${JSON.stringify(r.tokens[i])}\t${r.offsets[i][0]} ${r.offsets[i][1]}\n`).join(''));
    } else {
      process.stdout.write((await encode(tok, text, flags.includes('--add-special'))).ids.join(' ') + '\n');
    }
  } else if (cmd === 'decode') {
    if (args.length !== 1) fail('decode: one IDS argument');
    const s = args[0] === '-' ? fs.readFileSync(0, 'utf8') : args[0];
    const ids = s.trim() === '' ? [] : s.trim().split(/\s+/).map(Number);
    try { process.stdout.write(await decode(tok, ids, flags.includes('--skip-special'), vocab)); } catch (e) { fail(e.message); }
  } else if (cmd === 'batch') {
    const lines = fs.readFileSync(0, 'utf8').split('\n').filter((l) => l !== '');
    const out = [];
    for (const l of lines) {
      const [op, flag, arg] = JSON.parse(l);
      try {
        if (op === 'encode') { const r = await encode(tok, arg, flag); out.push(JSON.stringify({ ids: r.ids, offsets: r.offsets })); }
        else if (op === 'decode') out.push(JSON.stringify({ text: await decode(tok, arg, flag, vocab) }));
        else out.push(JSON.stringify({ error: `unknown op ${op}` }));
      } catch (e) { out.push(JSON.stringify({ error: e.message })); }
    }
    process.stdout.write(out.map((l) => l + '\n').join(''));
  } else {
    fail(`unknown command ${cmd}`);
  }
}
await main();
