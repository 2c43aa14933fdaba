// The package's Hugging Face tokenizers and chat templates against the native scalar build's
// ml_tok on the same .mlb (the oracle): tokenize / detokenize / applyChatTemplate must give the
// same ids, bytes and text in every wasm build, and a greedy generation must stop at the
// end-of-turn token as native ml_run does. The models: hf-models.mjs (smol-eog5.mlb's greedy
// chat reply reaches <|im_end|> after 14 tokens for the prompt below).
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { chooseBuild, detectFeatures, Krafla } from '../src/index.js';
import { Host } from '../src/host.js';
import { dir, IM_END, models, QWEN25_CONFIG, QWEN3_CONFIG, SMOL_TOKENIZER, tool } from './hf-models.mjs';
import { sharedDir, webDir } from './native.mjs';

const all = JSON.parse(readFileSync(join(webDir, 'dist', 'builds.json'), 'utf8')).builds;
const builds = process.env.KRAFLA_TEST_BUILDS ? all.filter((b) => process.env.KRAFLA_TEST_BUILDS.split(',').includes(b)) : all;
const runnable = (b) => { try { chooseBuild([b], detectFeatures(), { force: b }); return true; } catch { return false; } };

// --- the oracle: native ml_tok / ml_run -----------------------------------------------------------

const mlTok = (args, input) => execFileSync(tool('ml_tok'), args, { input, stdio: ['pipe', 'pipe', 'pipe'], maxBuffer: 1 << 26 });
const nativeEncode = (model, text, addSpecial) =>
  mlTok([model, 'encode', ...(addSpecial ? ['--add-special'] : [])], Buffer.from(text, 'utf8')).toString('utf8').trim().split(/\s+/).filter(Boolean).map(Number);
// decode prints bytes exactly; compared as bytes, and as text (TextDecoder replaces bad UTF-8 with U+FFFD as the package does).
const nativeDecode = (model, ids, skipSpecial) => mlTok([model, 'decode', ...(skipSpecial ? ['--skip-special'] : [])], ids.join(' '));
function nativeChat(model, messages, { noGenerationPrompt = false, vars = null, chatTemplate = null } = {}) {
  const m = join(dir, 'messages.json');
  writeFileSync(m, JSON.stringify(messages));
  const args = [model, 'chat', m];
  if (noGenerationPrompt) args.push('--no-generation-prompt');
  if (vars) args.push('--vars', JSON.stringify(vars));
  if (chatTemplate) {
    const t = join(dir, 'template.jinja');
    writeFileSync(t, chatTemplate);
    args.push('--chat-template', t);
  }
  return mlTok(args).toString('utf8');
}
// The text `ml_run --tokens IDS -n N --temp 0` generates (its stdout less the prompt's echo, which
// is what it prints with -n 0) and its count of generated tokens.
function nativeGreedyTokens(model, ids, n) {
  const run = (steps) => {
    const r = spawnSync(tool('ml_run'), [model, '--tokens', ids.join(' '), '-n', String(steps), '--temp', '0'], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const m = /generated (\d+) tokens/.exec(r.stderr);
    assert.ok(m, r.stderr);
    return { out: r.stdout.replace(/\n$/, ''), generated: Number(m[1]) };
  };
  const echo = run(0).out;
  const r = run(n);
  assert.ok(r.out.startsWith(echo));
  return { text: r.out.slice(echo.length), generated: r.generated };
}

// --- the corpus -------------------------------------------------------------------------------------

const CORPUS = [
  'Hello world, it\'s 2024!',
  '  leading spaces,\ttabs\t\tand\n\n\nnewlines   \n  ',
  '日本語のテキスト、中文字符，한국어 텍스트',
  'emoji 🌍🙂👍🏽 and a family 👨‍👩‍👧‍👦 and flags 🇮🇸🇯🇵',
  'café naïve Ærøskøbing Ölfusá ß ﬁ',
  '<|im_start|>user\nhi there<|im_end|>\n<|im_start|>assistant\n',
  'text<|endoftext|>more text <|im_end|>',
  '<|start_story|>Once upon a time<|end_story|>',
  'code:\n    def f(x):\n        return x ** 2  # 平方\n',
  'numbers 3.14159 1,000,000 0x1F and ALLCAPS CamelCase',
  ' ',
  '',
  'a'.repeat(300) + ' ' + '🙂'.repeat(40),
];

const MESSAGES = [
  { role: 'system', content: 'You are a helpful assistant. 简短回答。' },
  { role: 'user', content: 'Hi! What is 🌍 in 日本語?' },
  { role: 'assistant', content: '地球 (chikyū).' },
  { role: 'user', content: '  and   with spaces\n\nand newlines  ' },
];

// Every chat template in the shared data: llama.cpp's copies and those of the tokenizer_config.json files.
function publishedTemplates() {
  const hf = join(sharedDir, 'data', 'hf');
  const out = [];
  const jinja = join(hf, 'chat-templates-llamacpp');
  for (const f of readdirSync(jinja).filter((x) => x.endsWith('.jinja')).sort()) out.push([f, readFileSync(join(jinja, f), 'utf8')]);
  for (const f of [QWEN25_CONFIG, QWEN3_CONFIG, join(hf, 'tinyllama-1.1b-chat-v1.0', 'tokenizer_config.json'),
    join(hf, 'gemma-3-tokenizer_config', 'tokenizer_config.gemma-3-chat.json')]) {
    let t = JSON.parse(readFileSync(f, 'utf8')).chat_template;
    if (Array.isArray(t)) t = t.find((x) => x.name === 'default')?.template;
    if (typeof t === 'string') out.push([f.slice(hf.length + 1), t]);
  }
  assert.ok(out.length >= 8, `${out.length} templates found`);
  return out;
}

const { smol, tiny, eog } = models();

for (const build of builds.filter((b) => !runnable(b))) test(`tokenizers in ${build}`, { skip: `this node cannot run ${build}` }, () => {});

for (const build of builds.filter(runnable)) {
  describe(`tokenizers in ${build}`, () => {
    let k;
    before(async () => {
      k = await Krafla.create({ build, threads: build.endsWith('_mt') ? 2 : undefined });
    });
    after(() => k?.terminate());

    for (const [name, model, kind] of [['SmolLM2 (byte-level BPE)', smol, 'smol'], ['tinystories-656k-hf (SentencePiece-style BPE)', tiny, 'tiny']]) {
      test(`${name}: tokenize, detokenize equal native ml_tok`, async () => {
        const info = await k.load(model);
        assert.equal(info.tokenizerKind, 'hf');
        assert.equal(info.hasTokenizer, true);
        assert.equal(info.hasChatTemplate, kind === 'smol');
        for (const text of CORPUS) {
          for (const addSpecial of [false, true]) {
            const ids = await k.tokenize(text, { addSpecial });
            assert.deepEqual(ids, nativeEncode(model, text, addSpecial), `tokenize(${JSON.stringify(text)}, addSpecial ${addSpecial})`);
            for (const skipSpecial of [false, true]) {
              const got = await k.detokenize(ids, { skipSpecial });
              const want = nativeDecode(model, ids, skipSpecial);
              assert.deepEqual(Buffer.from(got, 'utf8'), want, `detokenize(tokenize(${JSON.stringify(text)}), skipSpecial ${skipSpecial})`);
            }
          }
        }
        // Ids that do not come from text: every special token, and byte tokens that do not form whole
        // characters (the decoded bytes then hold U+FFFD where native prints the raw bytes).
        const odd = kind === 'smol' ? [0, 1, 2, 3, 4, 16, 17, 100, 1000, 49151, 2, 0] : [0, 1, 2, 3, 4, 5, 200, 2047, 1, 2];
        for (const skipSpecial of [false, true]) {
          const got = await k.detokenize(odd, { skipSpecial });
          assert.equal(got, new TextDecoder().decode(nativeDecode(model, odd, skipSpecial)), `detokenize(${odd}, skipSpecial ${skipSpecial})`);
        }
        // addBos is the older name of addSpecial.
        assert.deepEqual(await k.tokenize('Once upon a time', { addBos: true }), nativeEncode(model, 'Once upon a time', true));
      });
    }

    test('SmolLM2 + ChatML: applyChatTemplate equals native ml_tok chat', async () => {
      await k.load(smol);
      const prompt = await k.applyChatTemplate(MESSAGES);
      assert.equal(prompt, nativeChat(smol, MESSAGES));
      assert.ok(prompt.endsWith('<|im_start|>assistant\n'), prompt);
      assert.equal(await k.applyChatTemplate(MESSAGES, { addGenerationPrompt: false }), nativeChat(smol, MESSAGES, { noGenerationPrompt: true }));
      // Qwen2.5's template has no system message of its own: without one it adds its default.
      const noSystem = MESSAGES.slice(1);
      assert.equal(await k.applyChatTemplate(noSystem), nativeChat(smol, noSystem));
      const vars = { enable_thinking: false };
      assert.equal(await k.applyChatTemplate(noSystem, { vars }), nativeChat(smol, noSystem, { vars }));
      // A template replacing the model's, whose output depends on a variable (Qwen3's enable_thinking).
      const qwen3 = JSON.parse(readFileSync(QWEN3_CONFIG, 'utf8')).chat_template;
      const plain = await k.applyChatTemplate(noSystem, { chatTemplate: qwen3 });
      assert.equal(plain, nativeChat(smol, noSystem, { chatTemplate: qwen3 }));
      const noThink = await k.applyChatTemplate(noSystem, { chatTemplate: qwen3, vars });
      assert.equal(noThink, nativeChat(smol, noSystem, { chatTemplate: qwen3, vars }));
      assert.notEqual(noThink, plain, 'enable_thinking changes the Qwen3 prompt');
      assert.equal(await k.applyChatTemplate(noSystem, { chatTemplate: qwen3, vars, addGenerationPrompt: false }),
        nativeChat(smol, noSystem, { chatTemplate: qwen3, vars, noGenerationPrompt: true }));
    });

    test('the published chat templates render as native ml_tok renders them', async () => {
      await k.load(smol);
      let rendered = 0;
      for (const [name, tmpl] of publishedTemplates()) {
        for (const messages of [MESSAGES, MESSAGES.slice(1)]) {
          for (const addGenerationPrompt of [true, false]) {
            const what = `${name} (${messages.length} messages, addGenerationPrompt ${addGenerationPrompt})`;
            let want;
            try {
              want = nativeChat(smol, messages, { chatTemplate: tmpl, noGenerationPrompt: !addGenerationPrompt });
            } catch {
              // The template refuses these messages (raise_exception): the package must refuse them too.
              await assert.rejects(k.applyChatTemplate(messages, { chatTemplate: tmpl, addGenerationPrompt }), /applyChatTemplate/, what);
              continue;
            }
            assert.equal(await k.applyChatTemplate(messages, { chatTemplate: tmpl, addGenerationPrompt }), want, what);
            ++rendered;
          }
        }
      }
      assert.ok(rendered >= 20, `only ${rendered} renderings`);
    });

    test('chat template errors are reported', async () => {
      await k.load(smol);
      await assert.rejects(k.applyChatTemplate(MESSAGES, { chatTemplate: '{{ messages[0].content ' }), /applyChatTemplate/);
      await assert.rejects(k.applyChatTemplate('not an array'), /messages must be an array/);
      await k.load(tiny);
      await assert.rejects(k.applyChatTemplate(MESSAGES), /applyChatTemplate/);
      // With a template of its own, a model without one renders.
      const t = '{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}';
      assert.equal(await k.applyChatTemplate(MESSAGES.slice(0, 2), { chatTemplate: t }), nativeChat(tiny, MESSAGES.slice(0, 2), { chatTemplate: t }));
    });

    test('a greedy chat generation stops at <|im_end|> as native ml_run does', async () => {
      const info = await k.load(eog);
      assert.equal(info.eosId, IM_END);
      const prompt = await k.applyChatTemplate(MESSAGES.slice(0, 2));
      const ids = await k.tokenize(prompt);
      assert.deepEqual(ids, nativeEncode(eog, prompt, false));
      assert.equal(ids.filter((x) => x === IM_END).length, 2, 'each message ends with <|im_end|>, parsed as the special token');
      const native = nativeGreedyTokens(eog, ids, 50);
      assert.ok(native.generated > 3 && native.generated < 50, `native ml_run stops after some text, before 50 tokens (generated ${native.generated})`);
      const r = await k.complete(prompt, { temperature: 0, maxTokens: 50, addBos: false });
      assert.equal(r.stats.stopReason, 'eos');
      assert.equal(r.stats.generatedTokens, native.generated);
      assert.equal(r.stats.promptTokens, ids.length);
      assert.equal(r.text, native.text);
      assert.ok(r.text.length > 10, r.text);
      // The same with the ids given, and a stop string that never occurs.
      const r2 = await k.complete('', { tokens: ids, temperature: 0, maxTokens: 50, stop: ['never in the output'] });
      assert.equal(r2.text, r.text);
      assert.equal(r2.stats.stopReason, 'eos');
      // The unpatched model runs to the length limit on the same prompt (the stop above is the patch's <|im_end|>).
      await k.load(smol);
      const r3 = await k.complete(prompt, { temperature: 0, maxTokens: 20, addBos: false });
      assert.equal(r3.stats.stopReason, 'length');
      assert.equal(r3.stats.generatedTokens, 20);
      assert.equal(r3.text, nativeGreedyTokens(smol, ids, 20).text);
      assert.ok(r3.text.length > 0);
    });
  });
}

test('krafla_token_is_eog: <|im_end|> ends a turn, text and <|im_start|> do not', async (t) => {
  const build = builds.filter(runnable).find((b) => !b.endsWith('_mt'));
  if (!build) return t.skip('no single-threaded build in dist/');
  const host = new Host(() => {});
  await host.op_init(0, { distUrl: new URL('../dist/', import.meta.url).href, build });
  await host.op_load(0, { source: smol });
  const isEog = (id) => host.mod._krafla_token_is_eog(host.session, id);
  const tok = JSON.parse(readFileSync(SMOL_TOKENIZER, 'utf8'));
  const id = (content) => tok.added_tokens.find((a) => a.content === content).id;
  assert.equal(isEog(id('<|im_end|>')), 1);
  assert.equal(isEog(id('<|im_start|>')), 0);
  for (const x of nativeEncode(smol, 'Hello world 日本', false)) assert.equal(isEog(x), 0);
  assert.equal(isEog(-1), 0);
  host.unload();
});
