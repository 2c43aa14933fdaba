// The oracle for the package's tests: the native scalar build (build/scalar/bin, built by
// scripts/test before the web step) converts stories260K and prints its greedy text.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const webDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const repoDir = resolve(webDir, '..');
export const sharedDir = process.env.KRAFLA_SHARED ? resolve(process.env.KRAFLA_SHARED) : resolve(repoDir, '..', 'shared');
export const modelsDir = join(sharedDir, 'models');
export const checkpoint = join(modelsDir, 'stories260K.bin');
export const tokenizer = join(modelsDir, 'tok512.bin');
/** A trained Hugging Face folder (../shared/models/SOURCES.md): config.json, model.safetensors, tokenizer.json, ... */
export const hfFolder = join(modelsDir, 'tinystories-656k-hf');
export const scalarBin = process.env.ML_SCALAR_BIN ? resolve(process.env.ML_SCALAR_BIN) : join(repoDir, 'build', 'scalar', 'bin');
export const artifactsDir = join(webDir, 'artifacts');

function tool(name) {
  const p = join(scalarBin, name);
  if (!existsSync(p)) throw new Error(`${p} is missing: build the scalar preset first (cmake --preset scalar && cmake --build --preset scalar)`);
  return p;
}

/** stories260K as a Q8 .mlb written by the native converter (web/artifacts/stories260K.mlb). */
export function nativeMlb() {
  mkdirSync(artifactsDir, { recursive: true });
  const out = join(artifactsDir, 'stories260K.mlb');
  if (!existsSync(out)) {
    execFileSync(tool('ml_convert'), ['llama2c', checkpoint, '--tokenizer', tokenizer, '-o', out, '--wtype', 'q8']);
  }
  return out;
}

/** What `ml_run MODEL -p PROMPT -n N --temp 0 [EXTRA...]` prints on stdout (the prompt's text, then the generated text). */
export function nativeGreedy(prompt, n, extra = []) {
  return execFileSync(tool('ml_run'), [nativeMlb(), '-p', prompt, '-n', String(n), '--temp', '0', ...extra], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })
    .replace(/\n$/, '');
}

/** Same with sampling: temperature, top-p and a seed. */
export function nativeSampled(prompt, n, temp, topP, seed) {
  return execFileSync(tool('ml_run'), [nativeMlb(), '-p', prompt, '-n', String(n), '--temp', String(temp), '--top-p', String(topP), '--seed', String(seed)],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).replace(/\n$/, '');
}

/**
 * A slow model (dim 768, 12 layers, 85 M weights: over 10 ms a token even on the SIMD builds, so
 * that a stop lands mid-generation) with stories260K's tokenizer (vocab 512).
 */
export const SLOW_MODEL = 'slow-768x12.mlb';
export function slowModel() {
  mkdirSync(artifactsDir, { recursive: true });
  const out = join(artifactsDir, SLOW_MODEL);
  if (!existsSync(out)) {
    execFileSync(tool('ml_convert'), ['random', '--dim', '768', '--hidden', '2048', '--layers', '12', '--heads', '12',
      '--kv-heads', '12', '--vocab', '512', '--max-seq', '1024', '--tokenizer', tokenizer, '--wtype', 'q8', '-o', out]);
  }
  return out;
}

/**
 * The text `ml_run MODEL -p PROMPT -n N --temp 0` generates (its stdout less the echo of the
 * prompt, which is what it prints with -n 0) and its count of generated tokens. MODEL may be a
 * Hugging Face folder (converted at load).
 */
export function nativeGenerated(model, prompt, n) {
  const run = (steps) => {
    const r = spawnSync(tool('ml_run'), [model, '-p', prompt, '-n', String(steps), '--temp', '0'], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`ml_run ${model}: ${r.stderr}`);
    return { out: r.stdout.replace(/\n$/, ''), generated: Number(/generated (\d+) tokens/.exec(r.stderr)?.[1]) };
  };
  const echo = run(0).out;
  const r = run(n);
  if (!r.out.startsWith(echo)) throw new Error(`ml_run ${model}: the output does not start with the prompt's echo`);
  return { text: r.out.slice(echo.length), generated: r.generated };
}
