// The strings krafla's tokenizers are checked on against Hugging Face's `tokenizers`: hand-picked
// edge cases (fixedCorpus), seeded random strings over a mix of scripts (randomStrings: the seed is
// printed with any failure so the string can be regenerated), and whole documents.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));

// Every kind of white space and line break the regexes and normalizers treat specially.
export const SPACES = ['\t', '\v', '\f', '\r', '\n', '\r\n', '\u0085', '\u00a0', '\u1680',
  '\u2000', '\u2001', '\u2002', '\u2003', '\u2004', '\u2005', '\u2006', '\u2007', '\u2008', '\u2009', '\u200a',
  '\u2028', '\u2029', '\u202f', '\u205f', '\u3000', '\u200b', '\ufeff'];

const PROSE = [
  'The lighthouse keeper had not spoken to anyone in three weeks, and he found that he did not mind.',
  'Every morning he climbed the one hundred and twelve steps, polished the great lens, and wrote the weather in a book nobody would read.',
  "It's strange, he thought, how quickly a man gets used to the sound of his own footsteps; they'd become a kind of company.",
  'In the spring a boat arrived with flour, lamp oil, a crate of oranges and a letter from his sister, who wrote that the city had changed beyond recognition.',
  '"You wouldn\'t know the old market," she wrote. "They\'ve built a glass hall where the fish stalls were, and everything costs twice what it did."',
  'He read the letter twice, folded it into quarters and put it under the clock, where he kept the things he meant to answer.',
  'On the 3rd of May, at 04:15, the barometer fell 12.5 millibars in an hour; by noon the sea was white to the horizon.',
  'He tied down the shutters, filled the lamps, and sat by the window with a cup of tea that went cold before he remembered it.',
  'The storm lasted two days. When it was over, the beach was covered in kelp, broken crates, and a single, perfectly intact wooden chair.',
  'He carried the chair up the hill, set it outside the door facing west, and from then on he watched the sunsets from it.',
];

// About n bytes of English prose (deterministic).
export function englishProse(n) {
  let out = '';
  for (let i = 0; out.length < n; i++) {
    out += PROSE[(i * 7) % PROSE.length] + (i % 4 === 3 ? '\n\n' : ' ');
  }
  return out.slice(0, n);
}

export function sourceFile() {
  const f = path.resolve(here, '../../src/model/tokenizer/llama2c.cpp');
  return fs.existsSync(f) ? fs.readFileSync(f, 'utf8') : 'int main(void) {\n\treturn 0;\n}\n';
}

export function fixedCorpus() {
  const c = [
    '', ' ', '  ', '   ', 'a', 'A', 'hello', ' hello', 'hello ', '  hello  world  ', 'Hello, World!',
    // contractions (and the case-insensitive (?i:'s|...) branch)
    "I'm sure you're right, they've said it'll work and we'd go.", "DON'T STOP. It'S fine. WE'LL SEE.", "'s 't 're 've 'm 'll 'd",
    "rock 'n' roll", "o'clock", "’twas the night",
    // numbers
    '0', '1', '12', '123', '1234', '12345', '123456789', '3.14159', '1,000,000', '-42', '2024-01-15', '0x1F', '1e-9',
    '٣٤٥ ١٢', '१२३', '½ ¾ ² ³', '①②③', 'Ⅻ',
    // accents and normalization (precomposed vs combining)
    'café', 'cafe\u0301', 'naïve résumé', 'Ångström', 'Ω vs Ω', 'ﬁ ligature', 'ǅ', 'İstanbul ıi',
    'e\u0301\u0302\u0303\u0304 a\u0308\u0308', '\u0301 leading combining mark', 'Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349\u035a\u032f\u031e\u0320\u034dA\u036b\u0357\u0334\u0362\u0335\u031c\u0330\u0354L\u0368\u0367\u0369\u0358\u0320G\u0311\u0357\u030e\u0305\u035b\u0341\u0334\u033b\u0348\u034d\u0354\u0339O\u0342\u030c\u030c\u0358\u0328\u0335\u0339\u033b\u031d\u0333',
    // CJK, Korean, Hindi, Arabic, Hebrew, Thai, Cyrillic, Greek, Khmer
    '日本語のテキストです。', '中文字符测试，标点符号！', '漢字かなカナ', '한국어 텍스트입니다', '한글 ㄱㄴㄷ ᄀᄂᄃ',
    'हिन्दी में लिखा गया पाठ', 'क्षत्रिय', 'العربية نص مكتوب', 'مرحبا بالعالم ١٢٣', 'עברית טקסט', 'ภาษาไทย',
    'Русский текст, Привет мир!', 'Ελληνικά κείμενο', 'ខ្មែរ', 'ᐊᐃᓐᓇᐅᑎᑦ', '𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕞𝕒𝕥𝕙', '𠜎𠜱𠝹𠱓',
    // emoji: ZWJ sequences, skin tones, flags, keycaps, variation selectors
    '😀', '👍🏽', '👩‍👩‍👧‍👦', '🏳️‍🌈', '👨🏿‍🚀', '🇮🇸🇯🇵', '1️⃣', '❤️', '☺︎', '🦙 llama 🦙🦙', 'a😀b😀c',
    // white space of every kind, alone, between words and in runs
    ...SPACES, ...SPACES.map((s) => `a${s}b`), ...SPACES.map((s) => `x${s}${s}${s}`), ...SPACES.map((s) => `${s} y`),
    SPACES.join(''), SPACES.join('z'), '\n\n\n', ' \n \n ', '\t\tindented\n\t\t\tmore', 'trailing   ', '   leading',
    'a \n b', 'end\n', '\r\r\n\n', ' ' + '\n'.repeat(5) + ' ',
    // control characters and NUL
    '\u0000', 'a\u0000b', '\u0001\u0002\u001f\u007f', '\u00ad soft hyphen', 'zero\u200bwidth', '\u200d\u200c', '\ufffd', '\uffff',
    // code
    'def f(x):\n    return x ** 2  # square\n', 'for (int i = 0; i < n; ++i) { a[i] += b[i]; }',
    '<html><body class="x">&amp;</body></html>', '{"key": [1, 2.5, null, true]}', 'SELECT * FROM t WHERE a <> b;',
    '#!/bin/sh\necho "$HOME" | grep -v ^$ && exit 0', 'x=>x*2;;;;', '----====****', '......', '!!!???', '@#$%^&*()_+',
    '~~~```', '\\n\\t\\\\', 'https://example.com/path?q=1&r=two#frag', 'user@example.com',
    // special tokens inside text
    '<|im_start|>user\nhi<|im_end|>', '<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>assistant\n',
    '<s>[INST] x [/INST]', '</s>', 'a</s>b', ' <s> ', '<s><s></s>', '<unk>', '<|endoftext|>', 'text<|endoftext|>more',
    '<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>', '<|reserved_special_token_7|>',
    '<|start_story|>Once upon a time<|end_story|>', '<|im_start', 'im_end|>', '<tool_call>{"a":1}</tool_call>',
    '<|fim_prefix|>def<|fim_suffix|>x<|fim_middle|>', '<0x0A>', '▁hello▁world', 'Ġhello', 'ĠĠ',
    // mixed and odd
    'Hello世界😀123abc', 'ＦＵＬＬＷＩＤＴＨ　ｔｅｘｔ', 'mIxEd CaSe', 'x'.repeat(100), 'ab'.repeat(300), '🙂'.repeat(50),
    'Lily▁loved▁to▁play', 'Once upon a time, there was a little girl named Lily.',
    // repeats (regex engines and merge loops on long inputs)
    'a'.repeat(10000), ' '.repeat(10000), '\n'.repeat(10000), '1'.repeat(10000), '日'.repeat(10000),
    // whole documents
    englishProse(3000), sourceFile(),
  ];
  return c;
}

// mulberry32
export function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const RANGES = [
  [0x20, 0x7e, 8], [0x61, 0x7a, 8], [0x30, 0x39, 3], [0xc0, 0x24f, 2], [0x300, 0x36f, 1], [0x370, 0x3ff, 1],
  [0x400, 0x4ff, 2], [0x590, 0x5ff, 1], [0x600, 0x6ff, 2], [0x900, 0x97f, 2], [0xe00, 0xe7f, 1], [0x1100, 0x11ff, 1],
  [0x3040, 0x30ff, 2], [0x4e00, 0x9fff, 3], [0xac00, 0xd7a3, 2], [0x1f300, 0x1faff, 2], [0x1f3fb, 0x1f3ff, 1],
  [0x2000, 0x206f, 1], [0xfe00, 0xfe0f, 1], [0xff00, 0xffef, 1], [0x20000, 0x2a6df, 1], [0x0, 0x1f, 1],
];
const TOTAL = RANGES.reduce((s, r) => s + r[2], 0);
const PIECES = [' ', '  ', '\n', "'s", "'ll", ' the', '\u200d', '<|im_end|>', '<s>', '</s>', '123', '\r\n', '\t', '▁'];

// One random string from a seed: 0..80 code points, mostly runs of one script, some spaces and pieces.
export function randomString(seed) {
  const r = prng(seed);
  const n = Math.floor(r() * r() * 80);
  let s = '';
  let range = RANGES[0];
  for (let i = 0; i < n; i++) {
    if (r() < 0.3) {
      let k = r() * TOTAL;
      for (const rg of RANGES) { k -= rg[2]; if (k < 0) { range = rg; break; } }
    }
    const x = r();
    if (x < 0.12) s += ' ';
    else if (x < 0.17) s += PIECES[Math.floor(r() * PIECES.length)];
    else {
      let cp = range[0] + Math.floor(r() * (range[1] - range[0] + 1));
      if (cp >= 0xd800 && cp <= 0xdfff) cp = 0x41;
      s += String.fromCodePoint(cp);
    }
  }
  return s;
}

export const RANDOM_SEED = Number(process.env.KRAFLA_HF_SEED || 20260202);
export function randomStrings(count, base = RANDOM_SEED) {
  const out = [];
  for (let i = 0; i < count; i++) out.push({ seed: base + i, text: randomString(base + i) });
  return out;
}
