// Krafla.cache in Chromium (issue 17): Cache Storage as the index, OPFS for files of 32 MiB or
// more (the 85 MB random model), nothing kept from a failed load, loads by URL offline from the
// cache, delete and clear (OPFS files too); and the kinds of a bad file and a 404 in a browser.
import { expect, test } from '@playwright/test';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { artifactsDir, nativeGreedy, SLOW_MODEL } from '../test/native.mjs';
import { ISOLATED, PLAIN } from '../playwright.config.mjs';

const PROMPT = 'Once upon a time';

// A page of the demo's origin with the package imported as window.K (the page itself is not used).
async function open(page, base) {
  await page.goto(`${base}/demo/index.html`);
  await page.evaluate(async () => {
    window.K = await import('/src/index.js');
    await window.K.Krafla.cache.clear();
  });
}

// The OPFS files of the default cache.
const opfsFiles = (page) => page.evaluate(async () => {
  const names = [];
  try {
    const top = await (await navigator.storage.getDirectory()).getDirectoryHandle('krafla-cache');
    for await (const [name] of (await top.getDirectoryHandle('krafla-models')).entries()) names.push(name);
  } catch { /* none */ }
  return names;
});

for (const [label, base] of [['cross-origin isolated', ISOLATED], ['not isolated', PLAIN]]) {
  test(`Krafla.cache: list, has, size, OPFS for a large model, offline loads, delete, clear (${label})`, async ({ page, context }) => {
    test.setTimeout(120_000);
    await open(page, base);
    const small = `${base}/models/stories260K.mlb`;
    const large = `${base}/models/${SLOW_MODEL}`;
    const smallSize = statSync(join(artifactsDir, 'stories260K.mlb')).size;
    const largeSize = statSync(join(artifactsDir, SLOW_MODEL)).size;
    const r = await page.evaluate(async ({ PROMPT }) => {
      const { Krafla } = window.K;
      const k = await Krafla.create();
      window.k = k;
      const out = { supported: Krafla.cache.supported, opfs: Krafla.cache.opfs };
      out.first = (await k.load('/models/stories260K.mlb', { cache: true })).fromCache;
      out.large = (await k.load('/models/slow-768x12.mlb', { cache: true })).fromCache;
      out.list = await Krafla.cache.list();
      out.hasSmall = await Krafla.cache.has('/models/stories260K.mlb');
      out.hasOther = await Krafla.cache.has('/models/other.mlb');
      out.size = await Krafla.cache.size();
      // Failed loads keep nothing: an HTML page (format), a 404 (io).
      out.errors = [];
      for (const url of ['/demo/index.html', '/models/no-such-model.mlb']) {
        try { await k.load(url, { cache: true }); } catch (e) { out.errors.push({ name: e.name, kind: e.kind, message: e.message }); }
      }
      out.modelAfterErrors = k.model?.dim ?? null;
      out.listAfterErrors = (await Krafla.cache.list()).length;
      return out;
    }, { PROMPT });
    expect(r.supported).toBe(true);
    expect(r.opfs).toBe(true);
    expect([r.first, r.large]).toEqual([false, false]);
    const byUrl = Object.fromEntries(r.list.map((e) => [e.url, e]));
    expect(Object.keys(byUrl).sort()).toEqual([large, small].sort());
    expect(byUrl[small]).toMatchObject({ size: smallSize, storage: 'cache' });
    expect(byUrl[large]).toMatchObject({ size: largeSize, storage: 'opfs' });
    expect([r.hasSmall, r.hasOther, r.size]).toEqual([true, false, smallSize + largeSize]);
    expect(r.errors.map((e) => [e.name, e.kind])).toEqual([['KraflaError', 'format'], ['KraflaError', 'io']]);
    expect(r.errors[0].message).toContain('/demo/index.html');
    expect(r.errors[1].message).toMatch(/no-such-model\.mlb: the download failed: HTTP 404/);
    expect(r.modelAfterErrors).toBe(768); // the model loaded before is kept
    expect(r.listAfterErrors).toBe(2);
    expect(await opfsFiles(page)).toHaveLength(1);

    // Offline: both load from the cache (the large one from OPFS) and generate.
    await context.setOffline(true);
    const off = await page.evaluate(async ({ PROMPT }) => {
      const { k } = window;
      const large = (await k.load('/models/slow-768x12.mlb', { cache: true })).fromCache;
      const small = (await k.load('/models/stories260K.mlb', { cache: true })).fromCache;
      const echo = await k.detokenize(await k.tokenize(PROMPT, { addBos: true }));
      const { text } = await k.complete(PROMPT, { temperature: 0, maxTokens: 40 });
      let missing = null;
      try { await k.load('/models/stories260K.bin', { tokenizer: '/models/tok512.bin', cache: true }); } catch (e) { missing = e.kind; }
      return { large, small, text: echo + text, missing };
    }, { PROMPT });
    await context.setOffline(false);
    expect([off.large, off.small, off.missing]).toEqual([true, true, 'io']);
    expect(off.text).toBe(nativeGreedy(PROMPT, 40));

    const del = await page.evaluate(async () => {
      const { Krafla } = window.K;
      const out = { deleted: await Krafla.cache.delete('/models/slow-768x12.mlb') };
      out.again = await Krafla.cache.delete('/models/slow-768x12.mlb');
      out.left = (await Krafla.cache.list()).map((e) => e.url);
      out.cleared = await Krafla.cache.clear();
      out.after = (await Krafla.cache.list()).length;
      window.k.terminate();
      return out;
    });
    expect(del).toEqual({ deleted: true, again: false, left: [small], cleared: 1, after: 0 });
    expect(await opfsFiles(page)).toEqual([]);
  });
}
