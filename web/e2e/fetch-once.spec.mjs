// The package fetches the build's files once (issue 17, item 6): the glue krafla.mjs, krafla.wasm
// and, in the threaded builds, krafla.worker.js, while it creates an engine, loads a model and
// generates twice; the model and builds.json once too. Its own modules are fetched at most twice:
// the page and the engine's module Worker are two realms with a module map each (with a server
// that allows caching, the second is the browser cache's). The oracle is the demo server's own count of the requests
// it served (`--count`, /__requests; it sends Cache-Control: no-store, so every fetch reaches it,
// those of the engine's worker and of the pthreads' workers too).
import { expect, test } from '@playwright/test';
import { nativeGreedy } from '../test/native.mjs';
import { ISOLATED, PLAIN } from '../playwright.config.mjs';

const PROMPT = 'Once upon a time';

for (const [label, base] of [['cross-origin isolated', ISOLATED], ['not isolated', PLAIN]]) {
  test(`each .mjs, .js and .wasm file is fetched once: create, load, generate twice (${label})`, async ({ page, request }) => {
    await page.goto(`${base}/demo/style.css`); // a page of the origin that starts no engine itself
    await request.get(`${base}/__requests?reset=1`);
    // 4 threads where isolated: a pool of 3 pthreads, each a worker that would load the glue itself.
    const r = await page.evaluate(async ({ PROMPT, threads }) => {
      const { Krafla } = await import('/src/index.js');
      const k = await Krafla.create({ threads });
      await k.load('/models/stories260K.mlb');
      const one = await k.complete(PROMPT, { temperature: 0, maxTokens: 40 });
      const two = await k.complete(PROMPT, { temperature: 0, maxTokens: 40 });
      const echo = await k.detokenize(await k.tokenize(PROMPT, { addBos: true }));
      const build = k.build;
      k.terminate();
      return { one: echo + one.text, two: echo + two.text, build: build.name, threads: build.nThreads };
    }, { PROMPT, threads: base === ISOLATED ? 4 : undefined });
    const counts = await (await request.get(`${base}/__requests`)).json();
    expect(r.build.endsWith('_mt')).toBe(base === ISOLATED);
    if (base === ISOLATED) expect(r.threads).toBe(4);
    expect(r.one).toBe(nativeGreedy(PROMPT, 40));
    expect(r.two).toBe(r.one);
    const files = Object.entries(counts).filter(([path]) => /\.(mjs|js|wasm)$/.test(path));
    const glue = [`/dist/${r.build}/krafla.mjs`, `/dist/${r.build}/krafla.wasm`, ...(base === ISOLATED ? [`/dist/${r.build}/krafla.worker.js`] : [])];
    const once = [...glue, '/dist/builds.json', '/models/stories260K.mlb', '/src/index.js', '/src/client.js', '/src/worker.js', '/src/host.js'];
    for (const f of once) expect(counts[f], `${f} in ${JSON.stringify(counts)}`).toBe(1);
    expect(files.filter(([path, n]) => !path.startsWith('/src/') && n !== 1), JSON.stringify(counts)).toEqual([]);
    expect(files.filter(([path, n]) => path.startsWith('/src/') && n > 2), JSON.stringify(counts)).toEqual([]);
  });
}
