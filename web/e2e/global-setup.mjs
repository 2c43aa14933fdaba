// Before the browser tests: stories260K as .mlb (native converter) and a slower random model with
// stories260K's tokenizer (the stop test needs a generation that lasts), in web/artifacts/; random
// models with SmolLM2's tokenizer and a chat template (the chat tests), in web/artifacts/hf/, and
// a slow one of those (dim 512, 8 layers: the chat's stop test).
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { dir, models, tool } from '../test/hf-models.mjs';
import { nativeMlb, slowModel } from '../test/native.mjs';

export default function setup() {
  nativeMlb();
  slowModel();
  models();
  const out = join(dir, 'slow-chat.mlb');
  if (!existsSync(out)) {
    execFileSync(tool('ml_convert'), ['random', '--dim', '512', '--hidden', '1536', '--layers', '8', '--heads', '8', '--kv-heads', '8',
      '--vocab', '49152', '--max-seq', '1024', '--rope-type', 'half', '--tokenizer', join(dir, 'smol-chat'), '--wtype', 'q8', '-o', out]);
  }
}
