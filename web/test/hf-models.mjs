// Models with Hugging Face tokenizers and chat templates for the package's tests, written by the
// native ml_convert into web/artifacts/hf/ (once; later runs reuse them):
//   smol-chat.mlb   a random body with SmolLM2's tokenizer.json (GPT-2 byte-level BPE, 49152
//                   tokens) and Qwen2.5's ChatML template, eos_token <|im_end|> (as e2e/cli/test_chat.py)
//   tinystories.mlb a random body with tinystories-656k-hf's tokenizer (SentencePiece-style BPE
//                   with byte fallback, 2048 tokens, add_bos_token, no chat template)
//   smol-eog5.mlb   smol-chat.mlb with the classifier row of <|im_end|> scaled 5 times, so that a
//                   greedy generation reaches it after some text
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { artifactsDir, scalarBin, sharedDir } from './native.mjs';

export const SMOL_TOKENIZER = join(sharedDir, 'data', 'hf', 'smollm2-135m-instruct', 'tokenizer.json');
export const QWEN25_CONFIG = join(sharedDir, 'data', 'hf', 'qwen2.5-0.5b-instruct', 'tokenizer_config.json');
export const QWEN3_CONFIG = join(sharedDir, 'data', 'hf', 'qwen3-0.6b', 'tokenizer_config.json');
export const TINYSTORIES = join(sharedDir, 'models', 'tinystories-656k-hf');
export const IM_END = 2; // SmolLM2's <|im_end|>

export function tool(name) {
  const p = join(scalarBin, name);
  if (!existsSync(p)) throw new Error(`${p} is missing: build the scalar preset first (cmake --build build/scalar --target ml_convert ml_tok ml_run)`);
  return p;
}

export const dir = join(artifactsDir, 'hf');

function convert(out, vocab, tokenizerFolder) {
  execFileSync(tool('ml_convert'), ['random', '--dim', '64', '--hidden', '128', '--layers', '2', '--heads', '2', '--kv-heads', '1',
    '--vocab', String(vocab), '--max-seq', '256', '--rope-type', 'half', '--tokenizer', tokenizerFolder, '-o', out]);
}

// Scales row `id` of the classifier (the `output` tensor, Q8 with f32 scales: docs/format.md) by factor.
function scaleClassifierRow(src, dst, id, factor) {
  const b = readFileSync(src);
  const v = new DataView(b.buffer, b.byteOffset, b.length);
  const n = v.getUint32(148, true);
  const at = Number(v.getBigUint64(152, true));
  let done = false;
  for (let i = 0; i < n; ++i) {
    const e = at + 96 * i;
    if (b.subarray(e, e + 48).toString('latin1').replace(/\0.*$/s, '') !== 'output') continue;
    assert.equal(v.getUint32(e + 48, true), 2, 'output is Q8');
    assert.equal(v.getUint32(e + 52, true), 0, 'output has f32 scales');
    const blocks = v.getUint32(e + 60, true) / 32;
    const scales = Number(v.getBigUint64(e + 80, true));
    for (let k = 0; k < blocks; ++k) {
      const o = scales + (id * blocks + k) * 4;
      v.setFloat32(o, v.getFloat32(o, true) * factor, true);
    }
    done = true;
  }
  assert.ok(done, `${src} has no output tensor`);
  writeFileSync(dst, b);
}

export function models() {
  mkdirSync(dir, { recursive: true });
  const folder = join(dir, 'smol-chat');
  const smol = join(dir, 'smol-chat.mlb');
  const tiny = join(dir, 'tinystories.mlb');
  const eog = join(dir, 'smol-eog5.mlb');
  if (!existsSync(smol)) {
    mkdirSync(folder, { recursive: true });
    copyFileSync(SMOL_TOKENIZER, join(folder, 'tokenizer.json'));
    const tmpl = JSON.parse(readFileSync(QWEN25_CONFIG, 'utf8')).chat_template;
    writeFileSync(join(folder, 'tokenizer_config.json'), JSON.stringify({ chat_template: tmpl, eos_token: '<|im_end|>', bos_token: null }));
    convert(smol, 49152, folder);
  }
  if (!existsSync(tiny)) convert(tiny, 2048, TINYSTORIES);
  if (!existsSync(eog)) scaleClassifierRow(smol, eog, IM_END, 5);
  return { smol, tiny, eog };
}

/**
 * rand-qwen35-chat.mlb: a random Qwen3.5-shaped model (linear-attention layers between full ones,
 * so its session cannot rewind: ml_session_truncate keeps all or nothing) with smol-chat's
 * tokenizer and template, the sizes of e2e/cli/test_run.py's small_config.
 */
export function recurrentChatModel() {
  models(); // smol-chat/, the tokenizer folder
  const out = join(dir, 'rand-qwen35-chat.mlb');
  if (existsSync(out)) return out;
  const c = JSON.parse(readFileSync(join(sharedDir, 'data', 'hf', 'qwen3.5-0.8b', 'config.reconstructed.json'), 'utf8'));
  const t = c.text_config ?? c;
  Object.assign(t, { hidden_size: 128, intermediate_size: 160, num_attention_heads: 4, num_key_value_heads: 2,
    max_position_embeddings: 256, num_hidden_layers: 4, head_dim: 64, layer_types: ['linear_attention', 'full_attention', 'linear_attention', 'full_attention'],
    full_attention_interval: 2, linear_num_key_heads: 2, linear_num_value_heads: 4, linear_key_head_dim: 16, linear_value_head_dim: 16 });
  const config = join(dir, 'qwen35-small.json');
  writeFileSync(config, JSON.stringify(c));
  execFileSync(tool('ml_convert'), ['random', '--config', config, '--vocab', '49152', '--seed', '3', '--tokenizer', join(dir, 'smol-chat'), '-o', out]);
  return out;
}
