// Bad input to $KRAFLA_TOK: invalid UTF-8 text, out-of-range ids, damaged tokenizer.json files
// (generated here from a small trained tokenizer into build/errors/). Each must give exit status 2
// (not a crash: nothing >= 128, no signal), a message naming the byte offset or the JSON field, in
// bounded time.
//   KRAFLA_TOK=build/scalar/bin/hf_tok_driver node --test e2e/hf/errors.test.mjs
// KRAFLA_HF_BIG=0 leaves out the 100 MB merges list (it takes a few seconds to write).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test, after } from 'node:test';
import { ensureTokenizers, BUILD, REAL } from './assemble.mjs';
import { KRAFLA_TOK, runTok } from './lib.mjs';

const skip = KRAFLA_TOK ? false : 'KRAFLA_TOK is not set';
const { 'trained-bl': baseFile } = await ensureTokenizers(['trained-bl']);
const base = JSON.parse(fs.readFileSync(baseFile, 'utf8'));
const DIR = path.join(BUILD, 'errors');
fs.mkdirSync(DIR, { recursive: true });
const LIMIT_MS = 20000;

function expectRefusal(r, needles, what, code = 2, limitMs = LIMIT_MS) {
  const info = `${what}: exit ${r.code} signal ${r.signal} in ${r.ms} ms, stderr ${JSON.stringify(r.stderr.slice(0, 500))}`;
  assert.ok(!r.timedOut, `${info}: timed out`);
  assert.equal(r.signal, null, `${info}: killed by a signal`);
  assert.ok(r.code < 128, `${info}: crashed`);
  assert.equal(r.code, code, `${info}: want exit status ${code}`);
  assert.ok(r.stderr.trim().length > 0, `${info}: no message`);
  const low = r.stderr.toLowerCase();
  assert.ok(needles.some((n) => low.includes(n.toLowerCase())), `${info}: the message should name one of ${JSON.stringify(needles)}`);
  assert.ok(r.ms < limitMs, `${info}: took too long`);
}

// Invalid UTF-8: [bytes, offset of the first bad byte].
const BAD_UTF8 = [
  [[0x61, 0x62, 0x80, 0x63], 2], // lone continuation byte
  [[0xff], 0], [[0x41, 0xfe, 0x41], 1], [[0x41, 0xc0, 0x80], 1], // never valid; overlong NUL
  [[0x61, 0xe0, 0x80, 0x80], 1], // overlong 3-byte
  [[0x61, 0x61, 0x61, 0xed, 0xa0, 0x80], 3], // UTF-16 surrogate D800
  [[0xf4, 0x90, 0x80, 0x80], 0], // above U+10FFFF
  [[0xf5, 0x80, 0x80, 0x80], 0],
  [[0x68, 0x69, 0xe6, 0x97], 2], // truncated at the end
  [[0xe6, 0x97, 0x41], 0], // truncated in the middle
  [[...Buffer.from('ok 日本 '), 0xc3], 10],
];
for (const [bytes, off] of BAD_UTF8) {
  test(`invalid UTF-8 ${Buffer.from(bytes).toString('hex')} -> exit 2 naming byte ${off}`, { skip }, async () => {
    for (const flags of [[], ['--add-special']]) {
      const r = await runTok([REAL.smollm2, 'encode', ...flags, '-'], Buffer.from(bytes));
      expectRefusal(r, [String(off)], `encode ${flags.join(' ')}`);
      assert.match(r.stderr, new RegExp(`(^|[^0-9])${off}([^0-9]|$)`), `the message names byte offset ${off}: ${r.stderr}`);
    }
  });
}

test('decode: ids out of range or not numbers -> exit 2', { skip }, async () => {
  for (const ids of ['49152', '1 2 99999999', '-1', 'x', '4294967296', '1 2x']) {
    expectRefusal(await runTok([REAL.smollm2, 'decode', ids]), ['id', ids.split(' ').pop()], `decode ${ids}`);
  }
});

// A file that cannot be opened is an I/O failure: exit 1 (docs/user-guide.md, "Exit codes").
test('missing tokenizer file -> exit 1', { skip }, async () => {
  expectRefusal(await runTok([path.join(DIR, 'does-not-exist.json'), 'encode', 'x']), ['does-not-exist', 'open', 'no such'], 'missing', 1);
});

// Damaged tokenizer.json files: [name, contents (string) or edit of a copy of base, fields the message may name].
const clone = () => JSON.parse(JSON.stringify(base));
const edit = (f) => { const j = clone(); f(j); return JSON.stringify(j); };
const baseText = JSON.stringify(base);
const firstTok = Object.keys(base.model.vocab)[0];
const CASES = [
  ['empty file', '', ['json', 'empty', 'offset', 'end']],
  ['truncated at half', baseText.slice(0, baseText.length >> 1), ['json', 'offset', 'end', 'truncated', 'unexpected']],
  ['truncated inside a string', baseText.slice(0, baseText.indexOf('"vocab"') + 3), ['json', 'offset', 'end', 'string', 'unterminated']],
  ['not JSON', 'this is not json', ['json', 'offset', 'unexpected', 'invalid']],
  ['top level is an array', '[]', ['object', 'model', 'top']],
  ['model missing', edit((j) => { delete j.model; }), ['model']],
  ['model.vocab is an array', edit((j) => { j.model.vocab = Object.keys(j.model.vocab); }), ['vocab']],
  ['model.vocab id is a string', edit((j) => { j.model.vocab[firstTok] = '7'; }), ['vocab']],
  ['model.vocab id is negative', edit((j) => { j.model.vocab[firstTok] = -1; }), ['vocab']],
  ['model.vocab id is 2^40', edit((j) => { j.model.vocab[firstTok] = 2 ** 40; }), ['vocab']],
  ['model.vocab id is fractional', edit((j) => { j.model.vocab[firstTok] = 1.5; }), ['vocab']],
  ['model.vocab two tokens share an id', edit((j) => { j.model.vocab.zzzqqq = j.model.vocab[firstTok]; }), ['vocab', 'duplicate']],
  ['model.vocab duplicate token (key twice)', baseText.replace('"vocab":{', `"vocab":{${JSON.stringify(firstTok)}:999999,`), ['vocab', 'duplicate']],
  ['model.merges is an object', edit((j) => { j.model.merges = { a: 'b' }; }), ['merges']],
  ['model.merges entry is a number', edit((j) => { j.model.merges[3] = 42; }), ['merges']],
  ['model.merges entry has no space', edit((j) => { j.model.merges[3] = 'abc'; }), ['merges']],
  ['model.merges entry has three parts', edit((j) => { j.model.merges[3] = ['a', 'b', 'c']; }), ['merges']],
  ['model.merges names an unknown token', edit((j) => { j.model.merges[5] = ['notatoken', 'xyz']; }), ['merges', 'notatoken']],
  ['model.type WordPiece', edit((j) => { j.model.type = 'WordPiece'; }), ['type', 'wordpiece']],
  ['model.type Unigram', edit((j) => { j.model = { type: 'Unigram', unk_id: 0, vocab: [['<unk>', 0], ['a', -1]] }; }), ['type', 'unigram']],
  ['model.type WordLevel', edit((j) => { j.model = { type: 'WordLevel', vocab: { a: 0 }, unk_token: 'a' }; }), ['type', 'wordlevel']],
  ['model.type is a number', edit((j) => { j.model.type = 7; }), ['type']],
  ['model.byte_fallback is a string', edit((j) => { j.model.byte_fallback = 'yes'; }), ['byte_fallback']],
  ['added_tokens is an object', edit((j) => { j.added_tokens = { a: 1 }; }), ['added_tokens']],
  ['added_tokens[0].content is a number', edit((j) => { j.added_tokens[0].content = 5; }), ['added_tokens', 'content']],
  ['added_tokens[0].id out of range', edit((j) => { j.added_tokens[0].id = 4294967296; }), ['added_tokens', 'id']],
  ['unknown normalizer type', edit((j) => { j.normalizer = { type: 'Frobnicate' }; }), ['normalizer', 'frobnicate']],
  ['unknown pre_tokenizer type', edit((j) => { j.pre_tokenizer = { type: 'Frobnicate' }; }), ['pre_tokenizer', 'frobnicate']],
  ['pre_tokenizer type is a number', edit((j) => { j.pre_tokenizer = { type: 12 }; }), ['pre_tokenizer', 'type']],
  ['malformed Split regex', edit((j) => { j.pre_tokenizer = { type: 'Split', pattern: { Regex: '(\\p{L}+' }, behavior: 'Isolated', invert: false }; }), ['pre_tokenizer', 'regex', 'pattern']],
  ['unknown decoder type', edit((j) => { j.decoder = { type: 'Frobnicate' }; }), ['decoder', 'frobnicate']],
  ['unknown post_processor type', edit((j) => { j.post_processor = { type: 'Frobnicate' }; }), ['post_processor', 'frobnicate']],
  ['nesting 100000 deep', `{"model":${'['.repeat(100000)}${']'.repeat(100000)}}`, ['depth', 'nest', 'deep', 'model']],
  ['NUL byte in the file', baseText.slice(0, 100) + '\u0000' + baseText.slice(100), ['json', 'offset', 'control', 'invalid', 'unexpected']],
  ['invalid UTF-8 in a token', null, ['utf-8', 'utf8', 'offset', 'vocab']],
];

for (const [name, text, needles] of CASES) {
  test(`damaged tokenizer.json: ${name} -> exit 2 naming ${needles.join('|')}`, { skip }, async () => {
    const file = path.join(DIR, `${name.replace(/[^a-zA-Z0-9]+/g, '_')}.json`);
    if (text === null) {
      const i = baseText.indexOf('"vocab":{"') + 10;
      fs.writeFileSync(file, Buffer.concat([Buffer.from(baseText.slice(0, i)), Buffer.from([0xff]), Buffer.from(baseText.slice(i))]));
    } else fs.writeFileSync(file, text);
    expectRefusal(await runTok([file, 'encode', 'hello world']), needles, name);
  });
}

test('a 100 MB merges list -> exit 2 naming merges, in bounded time', { skip: skip || (process.env.KRAFLA_HF_BIG === '0' && 'KRAFLA_HF_BIG=0') }, async () => {
  const file = path.join(DIR, 'huge_merges.json');
  const j = clone();
  const pair = JSON.stringify(j.model.merges[0]);
  j.model.merges = ['@@MERGES@@'];
  const [head, tail] = JSON.stringify(j).split('"@@MERGES@@"');
  const fd = fs.openSync(file, 'w');
  fs.writeSync(fd, head);
  const chunk = Buffer.from(`${pair},`.repeat(100000));
  for (let written = 0; written < 100 << 20; written += chunk.length) fs.writeSync(fd, chunk);
  fs.writeSync(fd, `${pair}${tail}`);
  fs.closeSync(fd);
  try {
    // A hang guard, not a speed check: parsing 100 MB takes 10-25 s on a shared 2-core CI machine
    // running other tests beside it (22.3 s once), so the bound is well above that.
    expectRefusal(await runTok([file, 'encode', 'hello'], '', { timeoutMs: 90000 }), ['merges', 'size', 'large', 'limit'],
      '100 MB merges', 2, 80000);
  } finally {
    fs.rmSync(file, { force: true });
  }
});

after(() => fs.rmSync(DIR, { recursive: true, force: true }));
