// GGUF files in Chromium (issue 17, items 3 and 5): a load by URL and from a Blob reports its
// progress phase by phase (download or read, then load) and gives ml_run's greedy text; a GGUF
// of an unsupported architecture or with a tensor of an unsupported type is refused, kind
// 'format', with the engine's message naming what is unsupported (the native ml_run's own words),
// never a header guess. The engine converts a GGUF file as it opens it, after letting the model
// before go (one model's memory at a time): after a refusal no model is loaded, and the next
// load works.
import { expect, test } from '@playwright/test';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { GGUF_TYPE, withArchitecture, withTensorType } from '../test/gguf-craft.mjs';
import { artifactsDir, modelsDir, nativeGenerated } from '../test/native.mjs';
import { PLAIN } from '../playwright.config.mjs';

const PROMPT = 'Once upon a time';
const GGUF = join(modelsDir, 'stories260K-gguf', 'stories260K.gguf');

test('a GGUF file by URL and as a Blob: progress per phase, then ml_run\'s greedy text', async ({ page }) => {
  await page.goto(`${PLAIN}/demo/style.css`);
  const size = statSync(GGUF).size;
  const r = await page.evaluate(async ({ PROMPT }) => {
    const { Krafla } = await import('/src/index.js');
    const k = await Krafla.create();
    const runs = {};
    // ?throttle: about 20 chunks a second, so that the download reports along the way.
    for (const [label, src] of [['url', '/models/stories260K-gguf/stories260K.gguf?throttle=600'],
      ['blob', await (await fetch('/models/stories260K-gguf/stories260K.gguf')).blob()]]) {
      const events = [];
      const info = await k.load(src, { cache: false, onProgress: (p) => events.push({ phase: p.phase, loaded: p.loaded, total: p.total }) });
      const echo = await k.detokenize(await k.tokenize(PROMPT, { addBos: true }));
      const out = await k.complete(PROMPT, { temperature: 0, maxTokens: 30 });
      runs[label] = { events, dim: info.dim, text: out.text, echo };
    }
    k.terminate();
    return runs;
  }, { PROMPT });
  const native = nativeGenerated(GGUF, PROMPT, 30);
  for (const [label, first] of [['url', 'download'], ['blob', 'read']]) {
    const { events, text, dim } = r[label];
    expect(dim).toBe(64);
    expect(text).toBe(native.text);
    // The phases in order, each once: the bytes, then the engine's conversion and load.
    const phases = events.map((e) => e.phase).filter((p, i, a) => p !== a[i - 1]);
    expect(phases, label).toEqual([first, 'load']);
    const bytes = events.filter((e) => e.phase === first);
    for (let i = 1; i < bytes.length; ++i) expect(bytes[i].loaded).toBeGreaterThanOrEqual(bytes[i - 1].loaded);
    expect(bytes[0].loaded).toBe(0);
    expect(bytes.at(-1)).toMatchObject({ loaded: size, total: size });
    const load = events.filter((e) => e.phase === 'load');
    expect(load[0].loaded).toBe(0);
    expect(load.at(-1).loaded / load.at(-1).total).toBe(1);
  }
  // 1.2 MB at 600 KB/s, about 20 chunks a second: the download reports along the way.
  expect(r.url.events.filter((e) => e.phase === 'download' && e.loaded > 0 && e.loaded < size).length).toBeGreaterThan(3);
});

test('an unsupported GGUF (architecture, tensor type) is refused naming what is unsupported; the next load works', async ({ page }) => {
  const arch = join(artifactsDir, 'unsupported-arch.gguf');
  const qtype = join(artifactsDir, 'unsupported-q8_1.gguf');
  withArchitecture(GGUF, arch, 'mamba');
  withTensorType(GGUF, qtype, 'blk.0.attn_q.weight', GGUF_TYPE.Q8_1);
  await page.goto(`${PLAIN}/demo/style.css`);
  const r = await page.evaluate(async ({ PROMPT }) => {
    const { Krafla } = await import('/src/index.js');
    const k = await Krafla.create();
    await k.load('/models/stories260K-gguf/stories260K.gguf');
    const before = (await k.complete(PROMPT, { temperature: 0, maxTokens: 20 })).text;
    const errors = {};
    for (const f of ['unsupported-arch.gguf', 'unsupported-q8_1.gguf']) {
      try {
        await k.load(`/models/${f}`, { cache: false });
        errors[f] = { message: 'loaded' };
      } catch (e) {
        errors[f] = { message: e.message, kind: e.kind };
      }
    }
    const model = k.model;
    const noModel = await k.complete(PROMPT, { maxTokens: 1 }).then(() => 'generated', (e) => e.message);
    await k.load('/models/stories260K-gguf/stories260K.gguf');
    const after = (await k.complete(PROMPT, { temperature: 0, maxTokens: 20 })).text;
    k.terminate();
    return { errors, before, after, model, noModel };
  }, { PROMPT });
  const a = r.errors['unsupported-arch.gguf'];
  expect(a.kind).toBe('format');
  expect(a.message).toContain('architecture "mamba" is not supported (llama, qwen2, qwen3, gemma3, qwen35)');
  const q = r.errors['unsupported-q8_1.gguf'];
  expect(q.kind).toBe('format');
  expect(q.message).toContain('tensor blk.0.attn_q.weight: type Q8_1 is not supported (F32, F16, BF16, Q8_0');
  for (const e of [a, q]) expect(e.message).not.toMatch(/implausible|llama2\.c/);
  expect(r.model).toBeNull();
  expect(r.noModel).toContain('no model is loaded');
  expect(r.after).toBe(r.before);
});
