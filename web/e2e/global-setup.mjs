// Before the browser tests: stories260K as .mlb (native converter) and a slower random model with
// stories260K's tokenizer (the stop test needs a generation that lasts), in web/artifacts/.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { artifactsDir, nativeMlb, scalarBin, tokenizer } from '../test/native.mjs';

export const SLOW_MODEL = 'slow-288x6.mlb';

export default function setup() {
  nativeMlb();
  const out = join(artifactsDir, SLOW_MODEL);
  if (!existsSync(out)) {
    execFileSync(join(scalarBin, 'ml_convert'), ['random', '--dim', '288', '--hidden', '768', '--layers', '6', '--heads', '6',
      '--kv-heads', '6', '--vocab', '512', '--max-seq', '1024', '--tokenizer', tokenizer, '--wtype', 'q8', '-o', out]);
  }
}
