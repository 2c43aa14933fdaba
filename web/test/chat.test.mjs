// k.chat.completions.create / k.completions.create (src/chat.js) against their oracles: the
// OpenAI shapes (object, id, choices, usage), the non-streamed reply equal to the deltas of the
// streamed one, the engine's own chat path (applyChatTemplate + complete), and native ml_server on
// the same model (build/scalar/bin/ml_server --port 0): the same text, finish_reason and usage
// (cached_tokens included) for the same requests at temperature 0, and the same error
// {status, message, type, param, code} for the same bad bodies. Without an ml_server binary those
// comparisons are skipped, loudly.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { chooseBuild, detectFeatures, Krafla, KraflaError } from '../src/index.js';
import { models, recurrentChatModel } from './hf-models.mjs';
import { scalarBin, webDir } from './native.mjs';

const all = JSON.parse(readFileSync(join(webDir, 'dist', 'builds.json'), 'utf8')).builds;
const builds = process.env.KRAFLA_TEST_BUILDS ? all.filter((b) => process.env.KRAFLA_TEST_BUILDS.split(',').includes(b)) : all;
const runnable = (b) => { try { chooseBuild([b], detectFeatures(), { force: b }); return true; } catch { return false; } };
const { smol, tiny, eog } = models();
const recurrent = recurrentChatModel();

const SERVER = join(scalarBin, 'ml_server');
const noServer = existsSync(SERVER) ? false : `${SERVER} is not built (cmake --build --preset scalar --target ml_server): the comparison with ml_server is SKIPPED`;
if (noServer) console.warn(`chat.test.mjs: ${noServer}`);

// ml_server on a model: one slot (so that its prefix cache sees the requests in the order sent), one thread.
async function startServer(model) {
  const p = spawn(SERVER, [model, '--port', '0', '--parallel', '1', '-t', '1'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  p.stderr.on('data', (d) => { err += d; });
  const url = await new Promise((resolve, reject) => {
    let out = '';
    p.stdout.on('data', (d) => {
      out += d;
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) resolve(m[1]);
    });
    p.on('exit', (c) => reject(new Error(`ml_server exited (${c}): ${err}`)));
  });
  for (let i = 0; i < 200; ++i) {
    if ((await fetch(`${url}/health`).catch(() => null))?.status === 200) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  const post = async (path, body) => {
    const r = await fetch(`${url}/v1/${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
    return { status: r.status, body: await r.json() };
  };
  // A streamed reply's chunks (the data: events before [DONE]).
  const stream = async (path, body) => {
    const r = await fetch(`${url}/v1/${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
    const events = (await r.text()).split('\n\n').filter(Boolean).map((e) => e.replace(/^data: /, ''));
    assert.equal(events.pop(), '[DONE]');
    return events.map((e) => JSON.parse(e));
  };
  return { post, stream, stop: () => p.kill() };
}

// smol-eog5.mlb's greedy reply to this reaches <|im_end|> after 14 tokens (tokenizer.test.mjs).
const HI = [{ role: 'system', content: 'You are a helpful assistant. 简短回答。' }, { role: 'user', content: 'Hi! What is 🌍 in 日本語?' }];
const turn2 = (reply) => [...HI, { role: 'assistant', content: reply }, { role: 'user', content: 'And a glacier, in one line?' }];

function checkHead(r, object, prefix) {
  assert.equal(r.object, object);
  assert.match(r.id, new RegExp(`^${prefix}[A-Za-z0-9]{24}$`));
  assert.ok(Number.isInteger(r.created) && Math.abs(r.created - Date.now() / 1000) < 600);
  assert.equal(typeof r.model, 'string');
}

function checkUsage(u) {
  assert.deepEqual(Object.keys(u), ['prompt_tokens', 'completion_tokens', 'total_tokens', 'prompt_tokens_details']);
  assert.equal(u.total_tokens, u.prompt_tokens + u.completion_tokens);
  assert.ok(u.prompt_tokens_details.cached_tokens >= 0 && u.prompt_tokens_details.cached_tokens < u.prompt_tokens);
}

async function collect(stream) {
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  return chunks;
}

// Bad bodies and what each refusal names: param and code (ml_server's, docs/server.md "Errors").
const BAD = [
  [{}, 'messages', 'missing_required_parameter'],
  [{ messages: [] }, 'messages', 'empty_array'],
  [{ messages: 'hi' }, 'messages', 'invalid_type'],
  [{ messages: [{ role: 'robot', content: 'x' }] }, 'messages[0].role', 'invalid_value'],
  [{ messages: [{ role: 'tool', content: 'x' }] }, 'messages[0].role', 'unsupported_value'],
  [{ messages: [{ role: 'user' }] }, 'messages[0].content', 'missing_required_parameter'],
  [{ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: {} }] }] }, 'messages[0].content[0].type', 'unsupported_value'],
  [{ messages: HI, n: 2 }, 'n', 'unsupported_value'],
  [{ messages: HI, temperature: 3 }, 'temperature', 'decimal_above_max_value'],
  [{ messages: HI, temperature: '0' }, 'temperature', 'invalid_type'],
  [{ messages: HI, top_p: -0.5 }, 'top_p', 'decimal_below_min_value'],
  [{ messages: HI, max_tokens: 0 }, 'max_tokens', 'integer_below_min_value'],
  [{ messages: HI, max_tokens: 1.5 }, 'max_tokens', 'invalid_type'],
  [{ messages: HI, seed: 0.5 }, 'seed', 'invalid_type'],
  [{ messages: HI, stop: ['a', 'b', 'c', 'd', 'e'] }, 'stop', 'array_above_max_length'],
  [{ messages: HI, stop: ['a', ''] }, 'stop[1]', 'invalid_value'],
  [{ messages: HI, stream_options: { include_usage: true } }, 'stream_options', 'invalid_value'],
  [{ messages: HI, response_format: { type: 'json_object' } }, 'response_format.type', 'unsupported_value'],
  [{ messages: HI, tools: [{ type: 'function' }] }, 'tools', 'unsupported_parameter'],
  [{ messages: HI, top_logprobs: 2 }, 'top_logprobs', 'invalid_value'],
  [{ messages: HI, logit_bias: { 5: 1 } }, 'logit_bias', 'unsupported_parameter'],
];
const BAD_COMPLETIONS = [
  [{}, 'prompt', 'missing_required_parameter'],
  [{ prompt: ['a', 'b'] }, 'prompt', 'unsupported_value'],
  [{ prompt: [1, -2] }, 'prompt[1]', 'integer_below_min_value'],
  [{ prompt: 'x', echo: true }, 'echo', 'unsupported_value'],
  [{ prompt: 'x', best_of: 3 }, 'best_of', 'unsupported_value'],
];

for (const build of builds.filter((b) => !runnable(b))) test(`chat API in ${build}`, { skip: `this node cannot run ${build}` }, () => {});

for (const build of builds.filter(runnable)) {
  describe(`chat API in ${build}`, () => {
    let k;
    before(async () => {
      k = await Krafla.create({ build, threads: build.endsWith('_mt') ? 2 : undefined });
    });
    after(() => k?.terminate());

    test('a non-streamed reply: OpenAI\'s shape, the text of the engine\'s own chat path', async () => {
      await k.load(eog);
      const r = await k.chat.completions.create({ model: 'smol', messages: HI, temperature: 0, max_tokens: 50 });
      checkHead(r, 'chat.completion', 'chatcmpl-');
      assert.equal(r.model, 'smol');
      assert.equal(r.choices.length, 1);
      const c = r.choices[0];
      assert.deepEqual(Object.keys(c), ['index', 'message', 'logprobs', 'finish_reason']);
      assert.deepEqual({ ...c.message, content: '' }, { role: 'assistant', content: '', refusal: null });
      assert.equal(c.logprobs, null);
      assert.equal(c.finish_reason, 'stop'); // smol-eog5 reaches <|im_end|>
      checkUsage(r.usage);
      // The independent path: the template, then a greedy generation from a fresh sequence.
      const prompt = await k.applyChatTemplate(HI);
      const ids = await k.tokenize(prompt);
      const own = await k.complete('', { tokens: ids, temperature: 0, maxTokens: 50 });
      assert.ok(own.text.length > 10);
      assert.equal(c.message.content, own.text);
      assert.equal(r.usage.prompt_tokens, ids.length);
      assert.equal(r.usage.completion_tokens, own.stats.generatedTokens);
    });

    test('streamed: role, deltas, finish_reason, usage; the deltas concatenated are the non-streamed reply', async () => {
      await k.load(eog);
      for (const sampling of [{ temperature: 0 }, { temperature: 0.9, top_p: 0.95, seed: 1234 }]) {
        const whole = await k.chat.completions.create({ messages: HI, max_tokens: 40, ...sampling });
        const s = await k.chat.completions.create({ messages: HI, max_tokens: 40, stream: true, stream_options: { include_usage: true }, ...sampling });
        assert.ok(s.controller instanceof AbortController);
        const chunks = await collect(s);
        for (const ch of chunks) {
          checkHead(ch, 'chat.completion.chunk', 'chatcmpl-');
          assert.equal(ch.id, chunks[0].id);
        }
        assert.deepEqual(chunks[0].choices[0].delta, { role: 'assistant', content: '' });
        const usageChunk = chunks.at(-1);
        assert.deepEqual(usageChunk.choices, []);
        checkUsage(usageChunk.usage);
        const last = chunks.at(-2).choices[0];
        assert.deepEqual(last.delta, {});
        assert.equal(last.finish_reason, whole.choices[0].finish_reason);
        const middle = chunks.slice(1, -2);
        assert.ok(middle.length > 1, 'the text comes in several chunks');
        for (const ch of middle) {
          assert.equal(ch.usage, null);
          assert.equal(ch.choices[0].finish_reason, null);
          assert.deepEqual(Object.keys(ch.choices[0].delta), ['content']);
        }
        assert.equal(middle.map((ch) => ch.choices[0].delta.content).join(''), whole.choices[0].message.content);
        assert.equal(usageChunk.usage.completion_tokens, whole.usage.completion_tokens);
        assert.equal(usageChunk.usage.prompt_tokens, whole.usage.prompt_tokens);
      }
      // Without include_usage, no usage member at all.
      const plain = await collect(await k.chat.completions.create({ messages: HI, max_tokens: 5, stream: true }));
      assert.ok(plain.every((ch) => !('usage' in ch) && ch.choices.length === 1));
    });

    test('a second chat turn evaluates only its new tokens (usage.prompt_tokens_details.cached_tokens), with the text of a fresh engine', async () => {
      await k.load(eog);
      const t1 = await k.chat.completions.create({ messages: HI, temperature: 0, max_tokens: 50 });
      assert.equal(t1.usage.prompt_tokens_details.cached_tokens, 0, 'the first request after a load reuses nothing');
      const body2 = { messages: turn2(t1.choices[0].message.content), temperature: 0, max_tokens: 50 };
      const t2 = await k.chat.completions.create(body2);
      const cached = t2.usage.prompt_tokens_details.cached_tokens;
      assert.ok(cached >= t1.usage.prompt_tokens, `turn 2 reuses at least turn 1's prompt (${cached} of ${t2.usage.prompt_tokens})`);
      assert.equal(k.lastStats.cachedTokens, cached);
      assert.equal(k.lastStats.promptTokens, t2.usage.prompt_tokens - cached, 'the engine evaluated only the new tokens');
      assert.ok(k.lastStats.promptTokens < t2.usage.prompt_tokens - t1.usage.prompt_tokens + 8);
      // The same request on a freshly loaded model (nothing to reuse) gives the same text.
      await k.load(eog);
      const fresh = await k.chat.completions.create(body2);
      assert.equal(fresh.usage.prompt_tokens_details.cached_tokens, 0);
      assert.equal(k.lastStats.promptTokens, fresh.usage.prompt_tokens);
      assert.equal(fresh.choices[0].message.content, t2.choices[0].message.content);
      assert.equal(fresh.usage.completion_tokens, t2.usage.completion_tokens);
      // The same request again: everything but the last prompt token is reused.
      const again = await k.chat.completions.create(body2);
      assert.equal(again.usage.prompt_tokens_details.cached_tokens, again.usage.prompt_tokens - 1);
      assert.equal(again.choices[0].message.content, t2.choices[0].message.content);
    });

    test('completions.create: raw prompts (text with BOS, or ids), max_tokens 16 by default', async () => {
      await k.load(smol);
      const r = await k.completions.create({ prompt: 'Once upon a time', temperature: 0 });
      checkHead(r, 'text_completion', 'cmpl-');
      assert.deepEqual(Object.keys(r.choices[0]), ['text', 'index', 'logprobs', 'finish_reason']);
      assert.equal(r.choices[0].finish_reason, 'length');
      assert.equal(r.usage.completion_tokens, 16);
      const ids = await k.tokenize('Once upon a time', { addSpecial: true });
      assert.equal(r.usage.prompt_tokens, ids.length);
      const own = await k.complete('', { tokens: ids, temperature: 0, maxTokens: 16 });
      assert.equal(r.choices[0].text, own.text);
      const byIds = await k.completions.create({ prompt: [ids], temperature: 0 });
      assert.equal(byIds.choices[0].text, own.text);
      const s = await collect(await k.completions.create({ prompt: ids, temperature: 0, stream: true }));
      assert.ok(s.every((ch) => ch.object === 'text_completion'));
      assert.equal(s.at(-1).choices[0].finish_reason, 'length');
      assert.equal(s.map((ch) => ch.choices[0].text).join(''), own.text);
      await assert.rejects(k.completions.create({ prompt: [1, 49152] }), (e) => e.param === 'prompt' && /outside the vocabulary 0..49151/.test(e.message));
      await assert.rejects(k.completions.create({ prompt: ids, min_p: 1 }), (e) => e.param === 'min_p' && e.code === 'decimal_above_max_value');
      // The penalties reach the sampler: a greedy reply that repeats itself ("JaneJaneJane") changes with them.
      await k.load(recurrent);
      const plain = (await k.chat.completions.create({ messages: HI, temperature: 0, max_tokens: 50 })).choices[0].message.content;
      assert.match(plain, /(Jane){3}/);
      for (const pen of [{ presence_penalty: 2 }, { frequency_penalty: 2 }]) {
        const r2 = await k.chat.completions.create({ messages: HI, temperature: 0, max_tokens: 50, ...pen });
        assert.notEqual(r2.choices[0].message.content, plain, JSON.stringify(pen));
        assert.doesNotMatch(r2.choices[0].message.content, /(Jane){3}/);
      }
    });

    test('the reused prefix is exactly what the engine holds: the prompt and every sampled token but the last (never fed)', async () => {
      await k.load(smol);
      const p = await k.tokenize('The weather today is', { addSpecial: true });
      const a = await k.completions.create({ prompt: p, max_tokens: 3, temperature: 0 });
      const g = await k.tokenize(a.choices[0].text);
      assert.equal(g.length, 3, 'the 3 generated tokens round-trip through their text (the test needs them)');
      const next = [...p, ...g, 5];
      const b = await k.completions.create({ prompt: next, max_tokens: 3, temperature: 0 });
      assert.equal(b.usage.prompt_tokens_details.cached_tokens, p.length + 2);
      assert.equal(k.lastStats.promptTokens, 2);
      assert.equal(b.choices[0].text, (await k.complete('', { tokens: next, maxTokens: 3, temperature: 0 })).text);
    });

    test('bad fields are refused as ml_server refuses them (KraflaError with status, type, param, code)', async () => {
      await k.load(eog);
      for (const [body, param, code] of BAD) {
        await assert.rejects(k.chat.completions.create(body), (e) => {
          assert.ok(e instanceof KraflaError, e);
          assert.equal(e.kind, 'arg');
          assert.equal(e.status, 400);
          assert.deepEqual(e.error, { message: e.message, type: 'invalid_request_error', param, code });
          assert.equal(e.param, param);
          assert.equal(e.code, code);
          return true;
        }, JSON.stringify(body));
      }
      for (const [body, param, code] of BAD_COMPLETIONS) {
        await assert.rejects(k.completions.create(body), (e) => e.param === param && e.code === code, JSON.stringify(body));
      }
      // What ml_server takes and this engine does not yet: refused, naming the field.
      for (const [field, value] of [['logprobs', true]]) {
        await assert.rejects(k.chat.completions.create({ messages: HI, [field]: value }),
          (e) => e.param === field && e.code === 'unsupported_value' && /in-browser engine/.test(e.message));
      }
      // The context: the prompt and one more token must fit.
      await assert.rejects(k.chat.completions.create({ messages: [{ role: 'user', content: 'word '.repeat(400) }] }),
        (e) => e.code === 'context_length_exceeded' && e.param === 'messages' && /maximum context length is 256 tokens/.test(e.message));
      // After all that, the engine answers.
      assert.equal((await k.chat.completions.create({ messages: HI, max_tokens: 3 })).usage.completion_tokens, 3);
    });

    test('a model without a chat template is refused for chat, and completes raw prompts', async () => {
      await k.load(tiny);
      await assert.rejects(k.chat.completions.create({ messages: HI }),
        (e) => e.status === 400 && e.param === 'messages' && /^the model has no chat template/.test(e.message));
      const r = await k.completions.create({ prompt: 'Once upon a time', max_tokens: 4, temperature: 0 });
      assert.equal(r.usage.completion_tokens, 4);
    });

    test('abort: a signal (in the body or the options) or stream.controller stops the request; the engine stays ready', async () => {
      await k.load(smol);
      const pre = new AbortController();
      pre.abort();
      await assert.rejects(k.chat.completions.create({ messages: HI, signal: pre.signal }), (e) => e.kind === 'abort' && e.message === 'Request was aborted.');
      await assert.rejects(k.chat.completions.create({ messages: HI }, { signal: pre.signal }), (e) => e.kind === 'abort');
      await assert.rejects(k.chat.completions.create({ messages: HI, signal: 'stop' }), /signal must be an AbortSignal, not string/);
      // Mid-stream: stop after the first text chunk of a reply that would run to 200 tokens.
      const ctl = new AbortController();
      const s = await k.chat.completions.create({ messages: HI, max_tokens: 200, stream: true }, { signal: ctl.signal });
      const got = [];
      await assert.rejects(async () => {
        for await (const ch of s) {
          got.push(ch);
          if (got.length === 2) ctl.abort();
        }
      }, (e) => e.kind === 'abort');
      assert.ok(got.length < 20, `${got.length} chunks after the abort`);
      // stream.controller, and breaking out of the loop.
      const s2 = await k.chat.completions.create({ messages: HI, max_tokens: 200, stream: true });
      await assert.rejects(async () => { for await (const _ of s2) s2.controller.abort(); }, (e) => e.kind === 'abort');
      for await (const _ of await k.chat.completions.create({ messages: HI, max_tokens: 200, stream: true })) break;
      const r = await k.chat.completions.create({ messages: HI, max_tokens: 7, temperature: 0 });
      assert.equal(r.usage.completion_tokens, 7);
      assert.equal(r.choices[0].finish_reason, 'length');
    });

    test('a model whose state cannot rewind (linear attention) reuses all it holds or nothing, as ml_server does', async (t) => {
      const server = noServer ? null : await startServer(recurrent);
      try {
        const seq = async (k2) => {
          await k2.load(recurrent);
          const r1 = await k2.chat.completions.create({ messages: HI, temperature: 0, max_tokens: 20 });
          const r2 = await k2.chat.completions.create({ messages: turn2(r1.choices[0].message.content), temperature: 0, max_tokens: 20 });
          const r3 = await k2.chat.completions.create({ messages: [{ role: 'system', content: 'Other.' }, HI[1]], temperature: 0, max_tokens: 20 });
          return [r1, r2, r3];
        };
        const ours = await seq(k);
        const cached = ours.map((r) => r.usage.prompt_tokens_details.cached_tokens);
        assert.equal(cached[0], 0);
        assert.ok(cached[1] === 0 || cached[1] >= ours[0].usage.prompt_tokens, `turn 2: ${cached[1]}`);
        assert.equal(cached[2], 0, 'a prompt that leaves the held tokens part way is fed afresh');
        // Each reply is what a freshly loaded model gives for it.
        for (const r of ours.slice(1)) {
          await k.load(recurrent);
          const body = r === ours[1] ? { messages: turn2(ours[0].choices[0].message.content) } : { messages: [{ role: 'system', content: 'Other.' }, HI[1]] };
          const fresh = await k.chat.completions.create({ ...body, temperature: 0, max_tokens: 20 });
          assert.equal(fresh.choices[0].message.content, r.choices[0].message.content);
        }
        if (!server) return t.diagnostic(noServer);
        const b1 = await server.post('chat/completions', { messages: HI, temperature: 0, max_tokens: 20 });
        const b2 = await server.post('chat/completions', { messages: turn2(b1.body.choices[0].message.content), temperature: 0, max_tokens: 20 });
        const b3 = await server.post('chat/completions', { messages: [{ role: 'system', content: 'Other.' }, HI[1]], temperature: 0, max_tokens: 20 });
        assert.deepEqual(ours.map((r) => [r.choices[0], r.usage]), [b1, b2, b3].map((b) => [b.body.choices[0], b.body.usage]));
        // min_p and the penalties on a reply that repeats itself: the same text as ml_server's.
        for (const extra of [{ presence_penalty: 2 }, { frequency_penalty: 1.5 }, { min_p: 0.3, temperature: 0.8, seed: 5 }]) {
          const body = { messages: HI, temperature: 0, max_tokens: 50, ...extra };
          const a = await k.chat.completions.create(body);
          const b = await server.post('chat/completions', body);
          assert.deepEqual(a.choices[0], b.body.choices[0], JSON.stringify(extra));
        }
      } finally {
        server?.stop();
      }
    });

    describe('the same as ml_server', { skip: noServer }, () => {
      test('the same replies, finish reasons and usage (cached tokens too) for a sequence of requests at temperature 0', async () => {
        const server = await startServer(eog);
        try {
          await k.load(eog);
          const t1 = { messages: HI, temperature: 0, max_tokens: 50 };
          const seq = [['chat/completions', t1]];
          const ours = [];
          const theirs = [];
          const run = async (path, body) => {
            const api = path === 'chat/completions' ? k.chat.completions : k.completions;
            const a = await api.create(body);
            const b = await server.post(path, body);
            assert.equal(b.status, 200, JSON.stringify(b.body));
            ours.push(a);
            theirs.push(b.body);
            return a;
          };
          const r1 = await run(...seq[0]);
          await run('chat/completions', { messages: turn2(r1.choices[0].message.content), temperature: 0, max_tokens: 50 });
          await run('chat/completions', { messages: [{ role: 'developer', content: [{ type: 'text', text: 'Be' }, { type: 'text', text: 'brief.' }] }, { role: 'user', content: 'Hi' }], temperature: 0, max_tokens: 20, stop: ['the'] });
          await run('completions', { prompt: 'Once upon a time', temperature: 0 });
          await run('completions', { prompt: [1, 2, 3, 4, 5], temperature: 0, max_tokens: 8 });
          // min_p and the penalties reach the sampler as ml_server's do (the greedy text changes with them).
          await run('completions', { prompt: [1, 2, 3, 4, 5], temperature: 0, max_tokens: 24, presence_penalty: 2 });
          await run('completions', { prompt: [1, 2, 3, 4, 5], temperature: 0, max_tokens: 24, frequency_penalty: 1.5 });
          await run('completions', { prompt: [1, 2, 3, 4, 5], temperature: 0.9, seed: 7, max_tokens: 24, min_p: 0.2 });
          for (let i = 0; i < ours.length; ++i) {
            const a = ours[i];
            const b = theirs[i];
            assert.equal(a.object, b.object);
            // The same members in the same order (ml_server writes OpenAI's key order).
            assert.deepEqual(Object.keys(a), Object.keys(b));
            assert.deepEqual(Object.keys(a.choices[0]), Object.keys(b.choices[0]));
            if (a.choices[0].message) assert.deepEqual(Object.keys(a.choices[0].message), Object.keys(b.choices[0].message));
            assert.deepEqual(a.usage, b.usage, `request ${i}`);
            assert.deepEqual({ ...a.choices[0] }, { ...b.choices[0] }, `request ${i}`);
          }
          assert.ok(ours[1].usage.prompt_tokens_details.cached_tokens > 0);
          // Streamed: the same chunks (one per engine step that released text), the same usage chunk.
          for (const [path, api, body] of [['chat/completions', k.chat.completions, { messages: HI, temperature: 0, max_tokens: 30 }],
            ['completions', k.completions, { prompt: [1, 2, 3, 4, 5], temperature: 0, max_tokens: 12 }]]) {
            const full = { ...body, stream: true, stream_options: { include_usage: true } };
            const strip = (ch) => ({ keys: Object.keys(ch).join(), choices: ch.choices, usage: ch.usage, object: ch.object });
            const a = (await collect(await api.create(full))).map(strip);
            const b = (await server.stream(path, full)).map(strip);
            assert.ok(a.length > 3, JSON.stringify(a));
            assert.deepEqual(a, b, path);
          }
        } finally {
          server.stop();
        }
      });

      test('the same errors (status, message, type, param, code) for the same bad bodies', async () => {
        const server = await startServer(eog);
        try {
          await k.load(eog);
          const bodies = [...BAD.map(([b]) => ['chat/completions', b]), ...BAD_COMPLETIONS.map(([b]) => ['completions', b]),
            ['chat/completions', { messages: [{ role: 'user', content: 'word '.repeat(400) }] }],
            ['completions', { prompt: [1, 49152] }],
            ['chat/completions', { messages: HI, stream: true, stream_options: 'x' }],
            ['chat/completions', { messages: HI, seed: 2 ** 70 }],
            ['chat/completions', { messages: HI, stop: 'x'.repeat(100), max_tokens: -3 }],
            ['chat/completions', { messages: [{ role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'video', text: 'b' }] }] }],
            ['chat/completions', { messages: HI, tool_choice: 'maybe' }]];
          for (const [path, body] of bodies) {
            const api = path === 'chat/completions' ? k.chat.completions : k.completions;
            const e = await api.create(body).then(() => null, (x) => x);
            const b = await server.post(path, body);
            assert.ok(e, `${JSON.stringify(body)} was refused by ml_server (${b.status}) but not here`);
            assert.deepEqual({ status: e.status, ...e.error }, { status: b.status, ...b.body.error }, JSON.stringify(body));
          }
        } finally {
          server.stop();
        }
      });

      test('a model without a chat template: refused by both, naming messages', async () => {
        const server = await startServer(tiny);
        try {
          await k.load(tiny);
          const e = await k.chat.completions.create({ messages: HI }).then(() => null, (x) => x);
          const b = await server.post('chat/completions', { messages: HI });
          assert.equal(e.status, b.status);
          assert.equal(e.param, b.body.error.param);
          assert.equal(e.type, b.body.error.type);
          assert.match(b.body.error.message, /^the model has no chat template: /);
          assert.match(e.message, /^the model has no chat template: /);
        } finally {
          server.stop();
        }
      });
    });
  });
}
