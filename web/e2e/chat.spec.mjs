// k.chat.completions.create in Chromium (a module Worker, the page's build): the same reply as
// the package gives in node for the same request at temperature 0 (node's is checked against
// ml_server by test/chat.test.mjs), streamed and whole, and a second turn that reuses the first's KV.
import { expect, test } from '@playwright/test';
import { Krafla } from '../src/index.js';
import { models } from '../test/hf-models.mjs';
import { ISOLATED, PLAIN } from '../playwright.config.mjs';

const HI = [{ role: 'system', content: 'You are a helpful assistant. 简短回答。' }, { role: 'user', content: 'Hi! What is 🌍 in 日本語?' }];

for (const [name, base] of [['isolated', ISOLATED], ['not isolated', PLAIN]]) {
  test(`the chat API in Chromium (${name}) answers as in node, and a second turn reuses the first`, async ({ page }) => {
    models(); // web/artifacts/hf/smol-eog5.mlb, served as /models/hf/smol-eog5.mlb
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(`${base}/demo/index.html`);
    const got = await page.evaluate(async (messages) => {
      const { Krafla } = await import('/src/index.js');
      const k = await Krafla.create();
      await k.load('/models/hf/smol-eog5.mlb');
      const body = { messages, temperature: 0, max_tokens: 50 };
      const whole = await k.chat.completions.create(body);
      let streamed = '';
      for await (const c of await k.chat.completions.create({ ...body, stream: true })) streamed += c.choices[0]?.delta.content ?? '';
      const turn2 = await k.chat.completions.create({ ...body, messages: [...messages, whole.choices[0].message, { role: 'user', content: 'And a glacier?' }] });
      const bad = await k.chat.completions.create({ messages, n: 3 }).catch((e) => ({ status: e.status, ...e.error }));
      k.terminate();
      return { build: k.build.name, whole, streamed, turn2, evaluated: k.lastStats.promptTokens, bad };
    }, HI);
    expect(errors).toEqual([]);
    expect(got.build).toMatch(name === 'isolated' ? /_mt$/ : /^wasm_[a-z0-9]+$/);
    // The oracle: the same requests in node, with the same build; node 20 cannot run relaxed SIMD
    // (../shared/TOOLCHAIN.md), so wasm_relaxed's is wasm_simd128's (every build gives ml_run's
    // greedy text: test/package.test.mjs).
    const nodeBuild = got.build.replace(/^wasm_relaxed/, 'wasm_simd128');
    const k = await Krafla.create({ build: nodeBuild, threads: nodeBuild.endsWith('_mt') ? undefined : false });
    try {
      await k.load(models().eog);
      const whole = await k.chat.completions.create({ messages: HI, temperature: 0, max_tokens: 50 });
      const turn2 = await k.chat.completions.create({ messages: [...HI, whole.choices[0].message, { role: 'user', content: 'And a glacier?' }], temperature: 0, max_tokens: 50 });
      expect(got.whole.choices).toEqual(whole.choices);
      expect(got.whole.usage).toEqual(whole.usage);
      expect(got.streamed).toBe(whole.choices[0].message.content);
      expect(got.turn2.choices).toEqual(turn2.choices);
      expect(got.turn2.usage).toEqual(turn2.usage);
      expect(got.turn2.usage.prompt_tokens_details.cached_tokens).toBeGreaterThan(whole.usage.prompt_tokens);
      expect(got.evaluated).toBe(got.turn2.usage.prompt_tokens - got.turn2.usage.prompt_tokens_details.cached_tokens);
      expect(got.bad).toEqual({ status: 400, message: "Unsupported value for 'n': 3. This server returns one choice per request: 'n' must be 1.",
        type: 'invalid_request_error', param: 'n', code: 'unsupported_value' });
    } finally {
      k.terminate();
    }
  });
}
