// Abort and flow control in a browser Web Worker (issue 17), isolated (the shared abort flag) and
// not (the abort message): a consumer slower than the engine (a busy main thread) holds it within
// its credit window, nothing is yielded after abort(), and the next request starts at once.
import { expect, test } from '@playwright/test';
import { nativeGreedy } from '../test/native.mjs';
import { ISOLATED, PLAIN } from '../playwright.config.mjs';

const PROMPT = 'Once upon a time';

for (const [label, base] of [['cross-origin isolated', ISOLATED], ['not isolated', PLAIN]]) {
  test(`abort from onToken at token 10: nothing after it; a busy page holds the worker back (${label})`, async ({ page }) => {
    await page.goto(`${base}/demo/index.html`);
    const r = await page.evaluate(async ({ PROMPT }) => {
      const { Krafla } = await import('/src/index.js');
      const { FLOW_WINDOW } = await import('/src/client.js');
      const k = await Krafla.create();
      await k.load('/models/stories260K.mlb');
      const busy = (ms) => { const t = performance.now(); while (performance.now() - t < ms); }; // a page busy rendering
      const ctl = new AbortController();
      let yielded = 0;
      let yieldedAtAbort = -1;
      let afterAbort = 0;
      let ahead = 0;
      let made = 0;
      for await (const piece of k.generate(PROMPT, {
        temperature: 0, maxTokens: 1000, signal: ctl.signal,
        onToken: (t) => {
          if (ctl.signal.aborted) ++afterAbort;
          made = t.n;
          if (t.n === 10) { yieldedAtAbort = yielded; ctl.abort(); }
        },
      })) {
        if (piece) ++yielded;
        ahead = Math.max(ahead, made - yielded);
        busy(5);
      }
      const stats = k.lastStats;
      const echo = await k.detokenize(await k.tokenize(PROMPT, { addBos: true }));
      const next = await k.complete(PROMPT, { temperature: 0, maxTokens: 40 });
      k.terminate();
      return { FLOW_WINDOW, yielded, yieldedAtAbort, afterAbort, ahead, stats, text: echo + next.text, build: k.build.name };
    }, { PROMPT });
    expect(r.build.endsWith('_mt')).toBe(base === ISOLATED);
    expect(r.stats.stopReason).toBe('abort');
    expect(r.yieldedAtAbort).toBeGreaterThanOrEqual(0);
    expect(r.yielded).toBe(r.yieldedAtAbort);
    expect(r.afterAbort).toBe(0);
    expect(r.ahead).toBeLessThanOrEqual(r.FLOW_WINDOW + 1);
    expect(r.stats.generatedTokens).toBeLessThanOrEqual(10 + r.FLOW_WINDOW + 1);
    expect(r.text).toBe(nativeGreedy(PROMPT, 40));
  });
}
