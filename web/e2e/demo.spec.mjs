// The demo page in Chromium: loading with a moving progress bar, greedy text equal to the native
// build's, streaming, stop, the build choice with and without cross-origin isolation, the cache,
// bad files, drag-and-drop, a Hugging Face folder by URL and by the folder picker.
import { expect, test } from '@playwright/test';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { artifactsDir, checkpoint, hfFolder, nativeGenerated, nativeGreedy, nativeMlb, SLOW_MODEL, tokenizer } from '../test/native.mjs';
import { ISOLATED, PLAIN } from '../playwright.config.mjs';

const PROMPT = 'Once upon a time';

async function open(page, base = ISOLATED, query = '') {
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(`${base}/demo/index.html${query}`);
  await expect(page.locator('#build')).toHaveAttribute('data-build', /wasm_/);
  await page.evaluate(() => caches.delete('krafla-models'));
  return errors;
}

async function loadUrl(page, model, tokenizer = '') {
  await page.selectOption('#model-pick', 'other');
  await page.fill('#model-url', model);
  await page.fill('#tokenizer-url', tokenizer);
  await page.click('#load-url');
  await expect(page.locator('#status')).toContainText('Loaded', { timeout: 30_000 });
}

async function generate(page, { temperature = 0, maxTokens = 200, prompt = PROMPT, seed = '' } = {}) {
  await page.fill('#prompt', prompt);
  await page.fill('#temperature', String(temperature));
  await page.fill('#max-tokens', String(maxTokens));
  await page.fill('#seed', seed);
  await page.click('#generate');
}

const stats = (page) => page.waitForFunction(() => window.kraflaDemo.stats, null, { timeout: 30_000 }).then((h) => h.jsonValue());

test('loads stories260K with a moving progress bar and generates the native greedy text, streaming', async ({ page }, info) => {
  const errors = await open(page);
  // A throttled download (about 1 MB at 400 KB/s), converted in the worker.
  await loadUrl(page, '/models/stories260K.bin?throttle=400', '/models/tok512.bin');
  const seen = await page.evaluate(() => window.kraflaDemo.progress);
  const during = [...new Set(seen.filter((v) => v > 0 && v < 0.9))];
  expect(during.length, `progress values seen: ${seen.join(' ')}`).toBeGreaterThan(3);
  expect(await page.locator('#progress').evaluate((p) => p.value)).toBe(1);

  // Record the text's length at every change while the generation runs.
  await page.evaluate(() => {
    window.lengths = [];
    new MutationObserver(() => {
      const gen = document.querySelector('#output .gen');
      if (gen) window.lengths.push([gen.textContent.length, window.kraflaDemo.generating, !!window.kraflaDemo.stats]);
    }).observe(document.querySelector('#output'), { childList: true, subtree: true, characterData: true });
  });
  await generate(page, { maxTokens: 200 });
  const s = await stats(page);
  // The screenshot first, so that it exists (for a look) whether or not what follows passes.
  const shot = join(artifactsDir, 'demo-after-generation.png');
  await page.screenshot({ path: shot, fullPage: true });
  await info.attach('demo after a generation', { path: shot, contentType: 'image/png' });
  expect(s.stopReason).toBe('length');
  expect(s.generatedTokens).toBe(200);
  const text = (await page.locator('#output .prompt').textContent()) + (await page.locator('#output .gen').textContent());
  expect(text).toBe(nativeGreedy(PROMPT, 200));
  const lengths = await page.evaluate(() => window.lengths);
  const streaming = lengths.filter(([len, generating, done]) => len > 0 && generating && !done);
  const final = text.length - PROMPT.length;
  expect(new Set(streaming.map(([len]) => len)).size, 'distinct lengths while generating').toBeGreaterThan(10);
  expect(Math.min(...streaming.map(([len]) => len))).toBeLessThan(final / 4);
  // A 5-token prompt (BOS included) is too few to time; 200 generated ones are timed unless they took under 20 ms.
  expect(await page.locator('#stats').textContent()).toMatch(/^Read the prompt: 5 tokens in \d+ ms \(too short to measure a speed\)\. Wrote the reply: 200 tokens in [^,]+(, [\d,]+ tokens per second| \(too short to measure a speed\))\. /);

  expect(errors).toEqual([]);
});

test('cross-origin isolated: the threaded build is chosen and gives the same text', async ({ page }) => {
  await open(page, ISOLATED);
  const b = await page.evaluate(() => window.kraflaDemo.build);
  expect(b.features.crossOriginIsolated).toBe(true);
  expect(b.threaded).toBe(true);
  expect(b.name).toMatch(/_mt$/);
  expect(b.nThreads).toBeGreaterThan(1);
  await expect(page.locator('#build')).toContainText(/threads/);
  await loadUrl(page, '/models/stories260K.mlb');
  await generate(page, { maxTokens: 120 });
  const s = await stats(page);
  expect(s.build).toBe(b.name);
  const text = (await page.locator('#output .prompt').textContent()) + (await page.locator('#output .gen').textContent());
  expect(text).toBe(nativeGreedy(PROMPT, 120));
});

test('not isolated: a single-threaded build is chosen, and it says why', async ({ page }) => {
  await open(page, PLAIN);
  const b = await page.evaluate(() => window.kraflaDemo.build);
  expect(b.features.crossOriginIsolated).toBe(false);
  expect(b.threaded).toBe(false);
  expect(b.name).not.toMatch(/_mt$/);
  await expect(page.locator('#build')).toContainText('not cross-origin isolated');
  await loadUrl(page, '/models/stories260K.mlb');
  await generate(page, { maxTokens: 80 });
  await stats(page);
  const text = (await page.locator('#output .prompt').textContent()) + (await page.locator('#output .gen').textContent());
  expect(text).toBe(nativeGreedy(PROMPT, 80));
});

for (const [label, base] of [['isolated: a shared abort flag', ISOLATED], ['not isolated: an abort message', PLAIN]]) {
test(`the stop button ends a generation within a token and the next one works (${label})`, async ({ page }) => {
  await open(page, base);
  await loadUrl(page, `/models/${SLOW_MODEL}`);
  // 1000 tokens of this model take over 10 s; greedy on it never samples EOS here (checked below).
  await generate(page, { temperature: 0, maxTokens: 1000 });
  await expect(page.locator('#output .gen')).not.toHaveText('', { timeout: 10_000 });
  await expect(page.locator('#stop')).toBeEnabled();
  // Clicked in the steady state: around the first pieces the page is busiest (first layout, the
  // stats line) and a loaded machine let the worker run 3 tokens ahead of the page's count there.
  await page.waitForFunction(() => window.kraflaDemo.tokens >= 20, null, { timeout: 10_000 });
  const atClick = await page.evaluate(() => { document.querySelector('#stop').click(); return window.kraflaDemo.tokens; });
  const s = await stats(page);
  expect(s.stopReason).toBe('abort');
  expect(s.generatedTokens).toBeLessThan(1000);
  // Within one token of the click (plus a token event possibly in flight).
  expect(s.generatedTokens).toBeLessThanOrEqual(atClick + 2);
  await expect(page.locator('#stats')).toContainText('Ended: stopped');
  await expect(page.locator('#stop')).toBeDisabled();
  await expect(page.locator('#generate')).toBeEnabled();
  await generate(page, { temperature: 0, maxTokens: 5 });
  expect((await stats(page)).generatedTokens).toBe(5);
});
}

test('a model loaded by URL is cached, and comes back by itself after a reload', async ({ page }) => {
  await open(page);
  await loadUrl(page, '/models/stories260K.bin', '/models/tok512.bin');
  await expect(page.locator('#status')).not.toContainText('from the browser cache');
  // After a reload the page loads it again by itself, from the cache, its tokenizer too.
  await page.reload();
  await expect(page.locator('#status')).toContainText('Loaded stories260K.bin from the browser cache', { timeout: 30_000 });
  expect(JSON.parse(await page.inputValue('#model-pick'))).toMatchObject({ url: `${ISOLATED}/models/stories260K.bin`, tokenizer: `${ISOLATED}/models/tok512.bin` });
  await generate(page, { maxTokens: 40 });
  await stats(page);
  const text = (await page.locator('#output .prompt').textContent()) + (await page.locator('#output .gen').textContent());
  expect(text).toBe(nativeGreedy(PROMPT, 40));
});

test('a model the engine refuses is not cached, and a cached copy that does not open is deleted', async ({ page }) => {
  const errors = await open(page);
  const model = readFileSync(nativeMlb());
  // The first tensor's type set to 9: a good header, a directory the engine refuses.
  const corrupt = Buffer.from(model);
  corrupt.writeUInt32LE(9, Number(corrupt.readBigUInt64LE(152)) + 48);
  writeFileSync(join(artifactsDir, 'corrupt.mlb'), corrupt);
  const entry = (url) => page.evaluate(async (u) => {
    const r = await (await caches.open('krafla-models')).match(u);
    return r ? (await r.arrayBuffer()).byteLength : 0;
  }, url);
  const loadFails = async (url, text) => {
    await page.selectOption('#model-pick', 'other');
    await page.fill('#model-url', url);
    await page.fill('#tokenizer-url', '');
    await page.click('#load-url');
    await expect(page.locator('#error')).toContainText(text, { timeout: 30_000 });
  };
  const corruptUrl = `${ISOLATED}/models/corrupt.mlb`;
  await loadFails(corruptUrl, 'unknown type 9');
  expect(await entry(corruptUrl)).toBe(0);

  // A damaged copy in the cache under the good model's URL: refused, deleted, downloaded again.
  const url = `${ISOLATED}/models/stories260K.mlb`;
  const put = (bytes, length) => page.evaluate(async ([u, b, n]) => {
    await (await caches.open('krafla-models')).put(u, new Response(new Uint8Array(b), { headers: { 'content-length': String(n) } }));
  }, [url, [...bytes], length]);
  await put(corrupt, corrupt.length);
  await loadFails(url, 'the cached copy was removed');
  await expect(page.locator('#error')).toContainText('unknown type 9');
  expect(await entry(url)).toBe(0);
  await loadUrl(page, url);
  await expect(page.locator('#status')).not.toContainText('from the browser cache');
  expect(await entry(url)).toBe(model.length);
  await loadUrl(page, url);
  await expect(page.locator('#status')).toContainText('from the browser cache');

  // A cached copy shorter than its Content-Length: both counts, deleted. The model loaded before stays loaded.
  await put(model.subarray(0, 100_000), model.length);
  await loadFails(url, `expected ${model.length} bytes (its Content-Length), received 100000`);
  expect(await entry(url)).toBe(0);
  await expect(page.locator('#status')).toContainText('still loaded');
  await generate(page, { maxTokens: 20 });
  expect((await stats(page)).generatedTokens).toBe(20);
  expect(errors).toEqual([]);
});

test('a bad file shows an error, and the page keeps working', async ({ page }) => {
  const errors = await open(page);
  await page.setInputFiles('#file', { name: 'not-a-model.bin', mimeType: 'application/octet-stream', buffer: Buffer.alloc(4096, 0x41) });
  await expect(page.locator('#error')).toBeVisible();
  await expect(page.locator('#error')).toContainText('not-a-model.bin: not a krafla .mlb model');
  await expect(page.locator('#generate')).toBeDisabled();
  const half = readFileSync(nativeMlb()).subarray(0, 100_000);
  await page.setInputFiles('#file', { name: 'truncated.mlb', mimeType: 'application/octet-stream', buffer: half });
  await expect(page.locator('#error')).toContainText('truncated.mlb');
  // Then a good pair of files: a llama2.c checkpoint and its tokenizer, converted in the worker.
  await page.setInputFiles('#file', [checkpoint, tokenizer]);
  await expect(page.locator('#status')).toContainText('Loaded stories260K.bin');
  await expect(page.locator('#error')).toBeHidden();
  await generate(page, { maxTokens: 30 });
  await stats(page);
  expect(errors).toEqual([]);
});

test('a .mlb dropped on the page loads', async ({ page }) => {
  await open(page);
  await page.evaluate(async () => {
    const blob = await (await fetch('/models/stories260K.mlb')).blob();
    const dt = new DataTransfer();
    dt.items.add(new File([blob], 'dropped.mlb'));
    document.querySelector('#drop').dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
  });
  await expect(page.locator('#status')).toContainText('Loaded dropped.mlb');
  await generate(page, { maxTokens: 50 });
  await stats(page);
  const text = (await page.locator('#output .prompt').textContent()) + (await page.locator('#output .gen').textContent());
  expect(text).toBe(nativeGreedy(PROMPT, 50));
});

test('a Hugging Face folder by URL (cached file by file) and by the folder picker gives ml_run\'s greedy text', async ({ page }) => {
  const errors = await open(page);
  const native = nativeGenerated(hfFolder, PROMPT, 40);
  const gen = async () => {
    await generate(page, { maxTokens: 40 });
    expect((await stats(page)).generatedTokens).toBe(native.generated);
    expect(await page.locator('#output .gen').textContent()).toBe(native.text);
  };
  await loadUrl(page, '/models/tinystories-656k-hf/');
  await expect(page.locator('#status')).not.toContainText('from the browser cache');
  await gen();
  const cached = await page.evaluate(async () => (await (await caches.open('krafla-models')).keys()).map((r) => new URL(r.url).pathname).sort());
  expect(cached).toEqual(['config.json', 'generation_config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json']
    .map((f) => `/models/tinystories-656k-hf/${f}`));
  await page.reload();
  await expect(page.locator('#status')).toContainText('Loaded tinystories-656k-hf from the browser cache', { timeout: 30_000 });
  await gen();
  // <input webkitdirectory>: the File objects of the whole folder.
  await page.setInputFiles('#folder', hfFolder);
  await expect(page.locator('#status')).toContainText('Loaded tinystories-656k-hf', { timeout: 30_000 });
  await gen();
  expect(errors).toEqual([]);
});
