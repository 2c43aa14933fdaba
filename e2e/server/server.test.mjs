// ml_server end to end, through the official OpenAI client (npm `openai` 6.49.0) and plain HTTP:
// a random Llama body with SmolLM2's tokenizer and Qwen2.5's ChatML template (so there are real
// chat turns and special tokens), served on 127.0.0.1 with --port 0.
//   KRAFLA_BIN=BUILD/bin KRAFLA_SHARED=../shared KRAFLA_SERVER_WORK=DIR node --test server.test.mjs
// Every wait is bounded; the servers are killed when the tests end.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import readline from 'node:readline';

let OpenAI;
try {
  OpenAI = (await import('openai')).default;
} catch {
  console.log('SKIP (openai): e2e/server/node_modules is missing (scripts/install-deps runs npm ci there)');
  process.exit(0);
}

const BIN = process.env.KRAFLA_BIN;
const SHARED = process.env.KRAFLA_SHARED;
const WORK = process.env.KRAFLA_SERVER_WORK || fs.mkdtempSync('/tmp/krafla-server-');
const KEY = 'sk-krafla-test';
assert.ok(BIN && SHARED, 'KRAFLA_BIN and KRAFLA_SHARED must be set');
fs.mkdirSync(WORK, { recursive: true });

function run(exe, args) {
  const r = spawnSync(path.join(BIN, exe), args, { encoding: 'utf8', timeout: 120000 });
  assert.equal(r.status, 0, `${exe} ${args.join(' ')}: ${r.stderr}`);
  return r;
}

// SmolLM2's tokenizer.json with Qwen2.5's ChatML template (as e2e/cli/test_chat.py makes it).
function chatModel() {
  const dir = path.join(WORK, 'smol-chatml');
  const out = path.join(WORK, 'smol-random.mlb');
  if (fs.existsSync(out)) return out;
  fs.mkdirSync(dir, { recursive: true });
  fs.copyFileSync(path.join(SHARED, 'data/hf/smollm2-135m-instruct/tokenizer.json'), path.join(dir, 'tokenizer.json'));
  const cfg = JSON.parse(fs.readFileSync(path.join(SHARED, 'data/hf/qwen2.5-0.5b-instruct/tokenizer_config.json'), 'utf8'));
  fs.writeFileSync(path.join(dir, 'tokenizer_config.json'),
    JSON.stringify({ chat_template: cfg.chat_template, eos_token: '<|im_end|>', bos_token: null }));
  run('ml_convert', ['random', '--dim', '64', '--hidden', '128', '--layers', '2', '--heads', '2', '--kv-heads', '1',
    '--vocab', '49152', '--max-seq', '512', '--rope-type', 'half', '--tokenizer', dir, '-o', out]);
  return out;
}

const servers = [];
after(() => { for (const s of servers) if (s.proc.exitCode === null) s.proc.kill('SIGKILL'); });

// Starts ml_server on a free port and waits (up to 60 s) until /health says ok.
async function startServer(args) {
  const proc = spawn(path.join(BIN, 'ml_server'), [...args, '--host', '127.0.0.1', '--port', '0'],
    { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += d; });
  const line = await new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('no "listening" line within 30 s: ' + stderr)), 30000);
    readline.createInterface({ input: proc.stdout }).once('line', (l) => { clearTimeout(t); resolve(l); });
    proc.once('exit', (code) => { clearTimeout(t); reject(new Error(`ml_server exited with ${code}: ${stderr}`)); });
  });
  const m = /^listening on (http:\/\/127\.0\.0\.1:(\d+))$/.exec(line);
  assert.ok(m, `first line: ${line}`);
  const s = { proc, base: m[1], port: Number(m[2]), stderr: () => stderr };
  servers.push(s);
  for (let i = 0; i < 600; ++i) {
    const r = await fetch(s.base + '/health').catch(() => null);
    if (r && r.status === 200) {
      assert.deepEqual(await r.json(), { status: 'ok' });
      return s;
    }
    if (r) assert.equal(r.status, 503);  // loading
    await new Promise((res) => setTimeout(res, 100));
  }
  throw new Error('/health not ok within 60 s: ' + stderr);
}

async function metrics(s) {
  const r = await fetch(s.base + '/metrics', { headers: { Authorization: `Bearer ${KEY}` } });
  assert.equal(r.status, 200);
  const out = {};
  for (const l of (await r.text()).split('\n')) {
    const m = /^(krafla_\w+) (\S+)$/.exec(l);
    if (m) out[m[1]] = Number(m[2]);
  }
  return out;
}

const MODEL = chatModel();
const srv = await startServer([MODEL, '--parallel', '2', '-t', '1', '--api-key', KEY, '--max-body', '1000000']);
const client = new OpenAI({ baseURL: srv.base + '/v1', apiKey: KEY, maxRetries: 0, timeout: 60000 });
const MSGS = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }];

async function streamed(params) {
  const stream = await client.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
  let text = '', finish = null, usage = null, chunks = 0;
  for await (const ch of stream) {
    ++chunks;
    if (ch.usage) usage = ch.usage;
    for (const c of ch.choices) {
      if (c.delta?.content) text += c.delta.content;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  return { text, finish, usage, chunks };
}

test('models.list names the model', async () => {
  const list = await client.models.list();
  assert.equal(list.data.length, 1);
  assert.equal(list.data[0].id, 'smol-random.mlb');
  assert.equal(list.data[0].object, 'model');
});

test('a greedy chat reply equals ml_run --chat', async () => {
  const r = await client.chat.completions.create({ model: 'x', messages: MSGS, max_tokens: 12, temperature: 0 });
  const cli = run('ml_run', [MODEL, '--chat', '-s', 'Be brief.', '-p', 'Hi', '-n', '12', '--temp', '0']);
  assert.equal(r.choices[0].message.content + '\n', cli.stdout);
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(r.object, 'chat.completion');
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.model, 'x');
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
  // The rendered prompt's length, as ml_tok counts it.
  const msgs = path.join(WORK, 'msgs.json');
  fs.writeFileSync(msgs, JSON.stringify(MSGS));
  const ids = run('ml_tok', [MODEL, 'chat', msgs, '--ids']).stdout.trim().split(/\s+/);
  assert.equal(r.usage.prompt_tokens, ids.length);
  assert.ok(r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= 12);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
});

test('streamed deltas add up to the whole reply', async () => {
  const params = { model: 'm', messages: MSGS, max_tokens: 20, temperature: 0.8, seed: 11 };
  const whole = await client.chat.completions.create(params);
  const s = await streamed(params);
  assert.equal(s.text, whole.choices[0].message.content);
  assert.equal(s.finish, whole.choices[0].finish_reason);
  assert.equal(s.usage.completion_tokens, whole.usage.completion_tokens);
  assert.equal(s.usage.prompt_tokens, whole.usage.prompt_tokens);
  assert.ok(s.chunks >= 3);
});

test('completions, whole and streamed, and stop strings', async () => {
  const params = { model: 'm', prompt: 'Once upon a time', max_tokens: 24, temperature: 0 };
  const whole = await client.completions.create(params);
  assert.equal(whole.object, 'text_completion');
  assert.match(whole.id, /^cmpl-/);
  const text = whole.choices[0].text;
  let streamedText = '', finish = null;
  for await (const ch of await client.completions.create({ ...params, stream: true })) {
    for (const c of ch.choices) {
      streamedText += c.text;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(streamedText, text);
  assert.equal(finish, whole.choices[0].finish_reason);
  // A stop string from the middle of the reply cuts it before its first match.
  assert.ok(text.length >= 8, `reply too short for a stop string: ${JSON.stringify(text)}`);
  const stop = text.slice(5, 8);
  const cut = await client.completions.create({ ...params, stop: [stop] });
  assert.equal(cut.choices[0].text, text.slice(0, text.indexOf(stop)));
  assert.equal(cut.choices[0].finish_reason, 'stop');
});

test('logprobs: the sampled token and its top alternatives', async () => {
  const r = await client.chat.completions.create({ model: 'm', messages: MSGS, max_tokens: 8, temperature: 0,
    logprobs: true, top_logprobs: 3 });
  const content = r.choices[0].logprobs.content;
  const eos = r.choices[0].finish_reason === 'stop' ? 1 : 0;
  assert.equal(content.length, r.usage.completion_tokens - eos);
  for (const t of content) {
    assert.ok(t.logprob <= 0);
    assert.equal(t.top_logprobs.length, 3);
    for (let i = 1; i < 3; ++i) assert.ok(t.top_logprobs[i - 1].logprob >= t.top_logprobs[i].logprob);
    // Greedy: the sampled token is the most probable one.
    assert.equal(t.top_logprobs[0].logprob, t.logprob);
    assert.equal(t.top_logprobs[0].token, t.token);
  }
});

test('completions logprobs: text_offset counts the bytes before each token, streamed or not', async () => {
  const params = { model: 'm', prompt: 'Once upon a time', max_tokens: 12, temperature: 0, logprobs: 2 };
  const whole = (await client.completions.create(params)).choices[0];
  assert.equal(whole.logprobs.tokens.length, whole.logprobs.text_offset.length);
  assert.equal(whole.logprobs.text_offset[0], 0);
  // (Offsets count the generated bytes; a random model's text may hold invalid UTF-8, which JSON
  // carries as U+FFFD, so the client cannot recount them: the streamed offsets must equal the
  // whole reply's.)
  const offsets = [], tokens = [];
  for await (const ch of await client.completions.create({ ...params, stream: true })) {
    for (const c of ch.choices) {
      if (c.logprobs?.text_offset?.length) offsets.push(...c.logprobs.text_offset);
      if (c.logprobs?.tokens?.length) tokens.push(...c.logprobs.tokens);
    }
  }
  assert.deepEqual(offsets, whole.logprobs.text_offset);
  assert.deepEqual(tokens, whole.logprobs.tokens);
});

test('the same reply cold, warm, after others and interleaved (fixed seed)', async () => {
  const params = { model: 'm', messages: [{ role: 'user', content: 'Tell me a story about a cat.' }], max_tokens: 16,
    temperature: 0.9, seed: 1234 };
  const want = (await client.chat.completions.create(params)).choices[0].message.content;
  const before = await metrics(srv);
  const warm = await client.chat.completions.create(params);
  assert.equal(warm.choices[0].message.content, want);
  const after = await metrics(srv);
  assert.equal(warm.usage.prompt_tokens_details.cached_tokens, warm.usage.prompt_tokens - 1);
  assert.equal(after.krafla_cached_tokens_total - before.krafla_cached_tokens_total, warm.usage.prompt_tokens - 1);
  await client.chat.completions.create({ ...params, messages: [{ role: 'user', content: 'Something else entirely' }], seed: 9 });
  assert.equal((await client.chat.completions.create(params)).choices[0].message.content, want);
  // Interleaved with five others on two slots (some wait in the queue), streamed and not.
  const others = [0, 1, 2, 3, 4].map((i) => client.chat.completions.create({ ...params, seed: 50 + i,
    messages: [{ role: 'user', content: `Question number ${i}?` }] }));
  const mine = [client.chat.completions.create(params), streamed(params)];
  const [a, b] = await Promise.all(mine);
  await Promise.all(others);
  assert.equal(a.choices[0].message.content, want);
  assert.equal(b.text, want);
});

test('a wrong or missing key gets 401 (AuthenticationError); /health needs none', async () => {
  const bad = new OpenAI({ baseURL: srv.base + '/v1', apiKey: 'sk-wrong', maxRetries: 0, timeout: 10000 });
  await assert.rejects(bad.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
  await assert.rejects(bad.chat.completions.create({ model: 'm', messages: MSGS }),
    (e) => e instanceof OpenAI.AuthenticationError);
  const r = await fetch(srv.base + '/v1/models');
  assert.equal(r.status, 401);
  const body = await r.json();
  assert.equal(typeof body.error.message, 'string');
  assert.equal((await fetch(srv.base + '/health')).status, 200);
});

test('errors in OpenAI shape: 400, 404, 405, 413, context_length_exceeded', async () => {
  const auth = { Authorization: `Bearer ${KEY}`, 'Content-Type': 'application/json' };
  const check = async (r, status) => {
    assert.equal(r.status, status);
    const b = await r.json();
    assert.equal(typeof b.error.message, 'string');
    assert.ok('type' in b.error && 'param' in b.error && 'code' in b.error, JSON.stringify(b));
    return b.error;
  };
  await check(await fetch(srv.base + '/v1/chat/completions', { method: 'POST', headers: auth, body: '{"messages": [' }), 400);
  await check(await fetch(srv.base + '/v1/nothing', { headers: auth }), 404);
  await check(await fetch(srv.base + '/v1/chat/completions', { headers: auth }), 405);
  await check(await fetch(srv.base + '/v1/completions', { method: 'POST', headers: auth, body: 'x'.repeat(2000000) }), 413);
  await assert.rejects(client.completions.create({ model: 'm', prompt: 'word '.repeat(600), max_tokens: 4 }),
    (e) => e instanceof OpenAI.BadRequestError && e.code === 'context_length_exceeded');
});

test('min_p and the penalties are honoured or refused with 400, never a server error', async () => {
  for (const extra of [{ min_p: 0.1 }, { presence_penalty: 0.5 }, { frequency_penalty: -0.5 }]) {
    for (const stream of [false, true]) {
      try {
        const r = await client.completions.create({ model: 'm', prompt: 'Hi', max_tokens: 4, seed: 1, stream, ...extra });
        if (stream) for await (const ch of r) assert.ok(ch.choices);
        else assert.equal(typeof r.choices[0].text, 'string');
      } catch (e) {
        assert.ok(e instanceof OpenAI.BadRequestError, `${JSON.stringify(extra)}: ${e}`);
      }
    }
  }
});

test('tokenize and detokenize', async () => {
  const auth = { Authorization: `Bearer ${KEY}`, 'Content-Type': 'application/json' };
  const t = await fetch(srv.base + '/tokenize', { method: 'POST', headers: auth,
    body: JSON.stringify({ content: 'Hello world', add_special: false }) });
  assert.equal(t.status, 200);
  const { tokens } = await t.json();
  const cli = run('ml_tok', [MODEL, 'encode', 'Hello world']).stdout.trim().split(/\s+/).map(Number);
  assert.deepEqual(tokens, cli);
  const d = await fetch(srv.base + '/detokenize', { method: 'POST', headers: auth, body: JSON.stringify({ tokens }) });
  assert.equal(d.status, 200);
  assert.equal((await d.json()).content, 'Hello world');
});

// A POST sent by hand with node:http (Expect: 100-continue, a chunked body).
function rawPost(p, body, headers) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: srv.port, path: p, method: 'POST', timeout: 30000,
      headers: { Authorization: `Bearer ${KEY}`, 'Content-Type': 'application/json', ...headers } });
    let continued = false;
    req.on('continue', () => { continued = true; req.end(body); });
    req.on('response', (res) => {
      let data = '';
      res.on('data', (d) => { data += d; });
      res.on('end', () => resolve({ status: res.statusCode, data, continued }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    if (!headers.Expect) {
      req.write(body.slice(0, 10));
      req.end(body.slice(10));
    }
  });
}

test('Expect: 100-continue and chunked request bodies', async () => {
  const body = JSON.stringify({ model: 'm', prompt: 'Hello', max_tokens: 3, temperature: 0 });
  const a = await rawPost('/v1/completions', body, { Expect: '100-continue', 'Content-Length': Buffer.byteLength(body) });
  assert.equal(a.status, 200, a.data);
  assert.ok(a.continued);
  const b = await rawPost('/v1/completions', body, { 'Transfer-Encoding': 'chunked' });
  assert.equal(b.status, 200, b.data);
  assert.equal(JSON.parse(b.data).choices[0].text, JSON.parse(a.data).choices[0].text);
});

test('keep-alive: requests share one connection', async () => {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const get = () => new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port: srv.port, path: '/health', agent, timeout: 10000 }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode, reused: req.reusedSocket }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
  });
  const a = await get();
  const b = await get();
  agent.destroy();
  assert.equal(a.status, 200);
  assert.equal(b.status, 200);
  assert.equal(b.reused, true);
});

test('a slow client times out (--timeout 1)', async () => {
  const s = await startServer([MODEL, '--parallel', '1', '-t', '1', '--timeout', '1']);
  const closed = await new Promise((resolve, reject) => {
    const sock = net.connect(s.port, '127.0.0.1', () => sock.write('POST /v1/completions HTTP/1.1\r\nHost: x\r\n'));
    const t = setTimeout(() => { sock.destroy(); resolve(false); }, 10000);
    sock.on('data', () => {});
    sock.on('close', () => { clearTimeout(t); resolve(true); });
    sock.on('error', () => {});
  });
  assert.ok(closed, 'the server kept a connection with half a request open for 10 s');
  s.proc.kill('SIGKILL');
});

// A prompt whose greedy reply runs the whole N tokens (no EOS), so that only a disconnect ends it
// early and it holds its slot for a while.
const N = 400;
let longPrompt = null;
async function findLongPrompt() {
  for (let i = 0; i < 10 && !longPrompt; ++i) {
    const p = `Story ${i}:`;
    const r = await client.completions.create({ model: 'm', prompt: p, max_tokens: N, temperature: 0 });
    if (r.choices[0].finish_reason === 'length') longPrompt = p;
  }
  assert.ok(longPrompt, 'no prompt of 10 ran to max_tokens');
  return longPrompt;
}

test('a client that leaves mid-stream frees its slot', async () => {
  const prompt = await findLongPrompt();
  const before = await metrics(srv);
  const controller = new AbortController();
  const stream = await client.completions.create({ model: 'm', prompt, max_tokens: N, temperature: 0, stream: true },
    { signal: controller.signal });
  let chunks = 0;
  try {
    for await (const ch of stream) {
      ++chunks;
      if (ch.choices.length) controller.abort();  // the client leaves after its first token
    }
  } catch (e) {
    assert.ok(e instanceof OpenAI.APIUserAbortError || e.name === 'AbortError', String(e));
  }
  assert.ok(chunks < N, `all ${chunks} chunks arrived: the abort did not end the stream`);
  let m = null;
  for (let i = 0; i < 100; ++i) {
    m = await metrics(srv);
    if (m.krafla_active_slots === 0) break;
    await new Promise((res) => setTimeout(res, 100));
  }
  assert.equal(m.krafla_active_slots, 0);
  assert.ok(m.krafla_generated_tokens_total - before.krafla_generated_tokens_total < N,
    'the generation ran to its end: the disconnect did not stop it');
});

test('503 when every slot and the queue are busy', async () => {
  const s = await startServer([MODEL, '--parallel', '1', '--queue', '0', '-t', '1']);
  const c = new OpenAI({ baseURL: s.base + '/v1', apiKey: 'none', maxRetries: 0, timeout: 60000 });
  const controller = new AbortController();
  const stream = await c.completions.create({ model: 'm', prompt: await findLongPrompt(), max_tokens: N,
    temperature: 0, stream: true }, { signal: controller.signal });
  const it = stream[Symbol.asyncIterator]();
  await it.next();  // it holds the only slot now
  await assert.rejects(c.completions.create({ model: 'm', prompt: 'x', max_tokens: 2 }),
    (e) => e instanceof OpenAI.APIError && e.status === 503);
  controller.abort();
  s.proc.kill('SIGKILL');
});

test('SIGTERM: the stream in flight finishes, then the server exits 0', async () => {
  const s = await startServer([MODEL, '--parallel', '1', '-t', '1']);
  const c = new OpenAI({ baseURL: s.base + '/v1', apiKey: 'none', maxRetries: 0, timeout: 60000 });
  const stream = await c.completions.create({ model: 'm', prompt: 'Story 1:', max_tokens: 200, temperature: 0, stream: true });
  const exited = new Promise((resolve) => s.proc.once('exit', (code) => resolve(code)));
  let text = '', finish = null, first = true;
  for await (const ch of stream) {
    if (first) { s.proc.kill('SIGTERM'); first = false; }
    for (const x of ch.choices) {
      text += x.text;
      if (x.finish_reason) finish = x.finish_reason;
    }
  }
  assert.ok(finish, 'the stream ended without a finish_reason');
  const code = await Promise.race([exited, new Promise((res) => setTimeout(() => res('timeout'), 30000))]);
  assert.equal(code, 0, s.stderr());
  const whole = await client.completions.create({ model: 'm', prompt: 'Story 1:', max_tokens: 200, temperature: 0 });
  assert.equal(text, whole.choices[0].text);
});
