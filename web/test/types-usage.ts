// Compiled (not run) by types.test.mjs: the API as the README shows it must type-check against
// src/index.d.ts, and misuse must not.
import { Krafla, KraflaError, chooseBuild, detectFeatures, parseHeader, type GenerateStats, type Progress } from '../src/index.js';

export async function usage(out: { textContent: string }): Promise<GenerateStats | null> {
  const k = await Krafla.create({ threads: false });
  const name: string = k.build.name;
  const info = await k.load('https://example.org/stories15M.bin', {
    tokenizer: new URL('https://example.org/tokenizer.bin'),
    onProgress: (p: Progress) => { out.textContent = `${p.phase} ${p.fraction ?? 0}`; },
    cache: 'krafla-models',
  });
  const dim: number = info.dim;
  await k.load(new Blob([]));
  await k.load(new ArrayBuffer(8));
  const ctl = new AbortController();
  for await (const piece of k.generate('Once upon a time', { maxTokens: 200, temperature: 0.8, topP: 0.9, seed: 42n, stop: ['.'], signal: ctl.signal })) {
    out.textContent += piece;
  }
  const ids: number[] = await k.tokenize('x', { addBos: true });
  const text: string = await k.detokenize(ids);
  const { stats } = await k.complete(text, { temperature: 0 });
  const b = chooseBuild(['wasm_simd128', 'wasm_scalar'], detectFeatures());
  const h = parseHeader(new Uint8Array(256));
  const e = new KraflaError('x');
  await k.unload();
  k.terminate();
  return dim + h.dim > 0 && b.threaded === false && e.kind !== '' && name !== '' ? stats : k.lastStats;
}
