// Abort and flow control (issue 17): the consumer never receives a piece after it aborted, the
// worker does not run ahead of the consumer by more than its credit window, breaking out of the
// loop leaves this run's stats in lastStats, and an already-aborted signal ends the iteration
// with stopReason 'abort' and no text. In worker mode (node worker_threads: the shared abort flag;
// threads: false: the abort message) and in-process.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Krafla } from '../src/index.js';
import { FLOW_WINDOW } from '../src/client.js';
import { nativeGreedy, nativeMlb } from './native.mjs';

const PROMPT = 'Once upon a time';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const modes = [
  ['worker, default build', {}],
  ['worker, threads: false (the abort message)', { threads: false }],
  ['in-process', { worker: false, threads: false }],
];

for (const [label, opts] of modes) {
  describe(`abort: ${label}`, () => {
    let k;
    before(async () => {
      k = await Krafla.create(opts);
      await k.load(nativeMlb()); // stories260K: thousands of tokens/s, far faster than a slow consumer
    });
    after(() => k?.terminate());

    test('abort() from onToken at token 10: no piece arrives after it, the engine is ready at once', async () => {
      const ctl = new AbortController();
      let yielded = 0;
      let yieldedAtAbort = -1;
      let tokensAfterAbort = 0;
      const it = k.generate(PROMPT, {
        temperature: 0, maxTokens: 1000, signal: ctl.signal,
        onToken: (t) => {
          if (ctl.signal.aborted) ++tokensAfterAbort;
          else if (t.n === 10) { yieldedAtAbort = yielded; ctl.abort(); }
        },
      });
      let stats;
      for (;;) {
        const r = await it.next();
        if (r.done) { stats = r.value; break; }
        ++yielded;
        await sleep(2); // a consumer slower than the engine
      }
      assert.equal(stats.stopReason, 'abort');
      assert.ok(yieldedAtAbort >= 0, 'the abort happened');
      assert.equal(yielded, yieldedAtAbort, `${yielded} pieces yielded, ${yieldedAtAbort} when aborted`);
      assert.equal(tokensAfterAbort, 0, 'onToken is not called after the abort');
      // The engine stopped within its window of the consumer, not 1000 tokens later.
      assert.ok(stats.generatedTokens <= 10 + FLOW_WINDOW + 1, `${stats.generatedTokens} tokens generated`);
      assert.equal(k.lastStats, stats);
      const r = await k.complete(PROMPT, { temperature: 0, maxTokens: 30 });
      assert.equal(r.stats.generatedTokens, 30);
    });

    test('a slow consumer holds the engine back: it runs at most the credit window ahead', async () => {
      let made = 0;
      let yielded = 0;
      let ahead = 0;
      for await (const piece of k.generate(PROMPT, { temperature: 0, maxTokens: 60, onToken: (t) => { made = t.n; } })) {
        if (piece) ++yielded;
        ahead = Math.max(ahead, made - yielded);
        await sleep(5);
      }
      assert.ok(ahead <= FLOW_WINDOW + 1, `the engine ran ${ahead} tokens ahead of the consumer`);
      assert.equal(k.lastStats.generatedTokens, 60);
    });

    test('break out of for await: lastStats is this run\'s (abort), and the next run starts at once', async () => {
      await k.complete(PROMPT, { temperature: 0, maxTokens: 5 });
      const before = k.lastStats;
      let n = 0;
      for await (const piece of k.generate(PROMPT, { temperature: 0, maxTokens: 1000 })) { if (piece && ++n === 3) break; }
      assert.notEqual(k.lastStats, before);
      assert.equal(k.lastStats.stopReason, 'abort');
      assert.ok(k.lastStats.generatedTokens < 1000);
      const r = await k.complete(PROMPT, { temperature: 0, maxTokens: 60 });
      assert.equal((await k.detokenize(await k.tokenize(PROMPT, { addBos: true }))) + r.text, nativeGreedy(PROMPT, 60));
    });

    test('an already-aborted signal ends the iteration with no text and stopReason abort', async () => {
      const ctl = new AbortController();
      ctl.abort();
      const pieces = [];
      const it = k.generate(PROMPT, { temperature: 0, maxTokens: 50, signal: ctl.signal });
      let stats;
      for (;;) {
        const r = await it.next();
        if (r.done) { stats = r.value; break; }
        pieces.push(r.value);
      }
      assert.deepEqual(pieces, []);
      assert.equal(stats.stopReason, 'abort');
      assert.equal(stats.generatedTokens, 0);
      assert.equal(k.lastStats, stats);
      // Bad options are still refused, as without a signal.
      await assert.rejects(k.complete(PROMPT, { topP: 0, signal: ctl.signal }), /topP 0 must be in \(0, 1\]/);
      assert.equal((await k.complete(PROMPT, { temperature: 0, maxTokens: 7 })).stats.generatedTokens, 7);
    });
  });
}
