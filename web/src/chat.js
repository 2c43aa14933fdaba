// The OpenAI client's surface on a Krafla instance: k.chat.completions.create(body, {signal}) and
// k.completions.create(body, {signal}), answering what ml_server answers for the same body
// (docs/server.md): the request rules of openai-request.js, the chat template and tokenization of
// http_generate.cpp (the template writes the special tokens; a completion's text gets BOS), and
// OpenAI's response, chunk and usage shapes. Each request keeps the KV of the longest prefix it
// shares with the tokens the engine holds from the previous one (generate's reusePrefix), so a
// chat turn evaluates only its new tokens; usage.prompt_tokens_details.cached_tokens says how
// many were reused, as ml_server reports it.
import { KraflaError } from './errors.js';
import { apiError, parseChatRequest, parseCompletionRequest } from './openai-request.js';

const MAX_INT32 = 2147483647;
const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

function randomId(prefix) {
  const r = crypto.getRandomValues(new Uint32Array(24));
  return prefix + Array.from(r, (x) => ALNUM[x % 62]).join('');
}

// openai-node's APIUserAbortError says "Request was aborted."; here a KraflaError of kind 'abort'.
function abortError() {
  const e = new KraflaError('Request was aborted.', 'abort');
  e.name = 'AbortError';
  return e;
}

// The engine's message without the worker's "krafla: what: " prefix (ml_server quotes the engine's own).
const engineMessage = (e, what) => String(e?.message ?? e).replace(new RegExp(`^krafla: ${what}: `), '');

// The request's prompt as token ids, refused as ml_server refuses it (http_generate.cpp).
async function promptIds(k, rq) {
  const m = k.model;
  if (!m) throw apiError(503, 'krafla: no model is loaded (call load first)', 'server_error', null, 'model_loading', 'state');
  let ids;
  if (rq.kind === 'chat') {
    if (!m.hasTokenizer) throw apiError(400, 'the model has no tokenizer, so it cannot chat', 'invalid_request_error', 'messages');
    if (!m.hasChatTemplate) {
      throw apiError(400, 'the model has no chat template: render the messages with k.applyChatTemplate(messages, {chatTemplate}) ' +
        'and use completions.create, as ml_server without --chat-template FILE refuses them', 'invalid_request_error', 'messages');
    }
    let text;
    try {
      text = await k.applyChatTemplate(rq.messages, { addGenerationPrompt: true, vars: rq.vars });
    } catch (e) {
      if (!(e instanceof KraflaError) || e.kind === 'crash' || e.kind === 'state') throw e;
      throw apiError(400, `the chat template failed: ${engineMessage(e, 'applyChatTemplate')}`, 'invalid_request_error', 'messages');
    }
    ids = await k.tokenize(text, { addSpecial: false });
  } else if (rq.promptIds) {
    const bad = rq.promptIds.find((id) => id >= m.vocabSize);
    if (bad !== undefined) {
      throw apiError(400, `token id ${bad} is outside the vocabulary 0..${m.vocabSize - 1}`, 'invalid_request_error', 'prompt');
    }
    ids = rq.promptIds;
  } else {
    if (!m.hasTokenizer) throw apiError(400, 'the model has no tokenizer: give the prompt as token ids', 'invalid_request_error', 'prompt');
    ids = await k.tokenize(rq.prompt, { addSpecial: true });
  }
  if (!ids.length) throw apiError(400, 'the prompt is empty (it has no tokens)', 'invalid_request_error', 'prompt');
  if (ids.length + 1 > m.ctx) {
    throw apiError(400, `This model's maximum context length is ${m.ctx} tokens. However, your messages resulted in ${ids.length} tokens, ` +
      'and the reply needs at least one more.', 'invalid_request_error', rq.kind === 'chat' ? 'messages' : 'prompt', 'context_length_exceeded');
  }
  return ids;
}

// One signal from the caller's (the body's `signal` or the options') and the stream's controller.
function linkSignal(controller, ...signals) {
  for (const s of signals) {
    if (!s) continue;
    if (typeof s.addEventListener !== 'function' || typeof s.aborted !== 'boolean') {
      throw new KraflaError(`krafla: signal must be an AbortSignal, not ${typeof s}`, 'arg');
    }
    if (s.aborted) controller.abort(s.reason);
    else s.addEventListener('abort', () => controller.abort(s.reason), { once: true });
  }
  return controller.signal;
}

/**
 * One request's generation: the pieces of text as an async iterator, started (its prompt fed)
 * before create() resolves, so that an engine refusal rejects create() as ml_server answers it
 * with an HTTP error before any chunk.
 */
async function start(k, rq, signal) {
  const ids = await promptIds(k, rq);
  const it = k.generate('', {
    tokens: ids,
    reusePrefix: true,
    maxTokens: rq.maxTokens < 0 ? MAX_INT32 : rq.maxTokens,
    temperature: rq.temperature,
    topP: rq.topP,
    topK: rq.topK,
    minP: rq.minP,
    presencePenalty: rq.presencePenalty,
    frequencyPenalty: rq.frequencyPenalty,
    seed: rq.seed ?? undefined,
    stop: rq.stop,
    signal,
  });
  let first;
  try {
    first = await it.next();
  } catch (e) {
    if (signal.aborted) throw abortError();
    if (!(e instanceof KraflaError) || e.kind === 'crash' || e.kind === 'state') throw e;
    const a = apiError(400, `the request cannot be served: ${engineMessage(e, 'generate')}`);
    a.kind = e.kind;
    throw a;
  }
  return { ids, it, first };
}

// The pieces after the first, each {text} and at the end {stats}; an abort or a failure throws.
async function* pieces(g, signal) {
  let r = g.first;
  for (;;) {
    if (r.done) {
      if (signal.aborted || r.value?.stopReason === 'abort') throw abortError();
      yield { stats: r.value };
      return;
    }
    yield { text: r.value };
    try {
      r = await g.it.next();
    } catch (e) {
      if (signal.aborted) throw abortError();
      if (!(e instanceof KraflaError) || e.kind === 'crash') throw e;
      const a = apiError(500, `generation failed: ${engineMessage(e, 'generate')}`, 'server_error');
      a.kind = e.kind;
      throw a;
    }
  }
}

function usage(g, stats) {
  return {
    prompt_tokens: g.ids.length,
    completion_tokens: stats.generatedTokens,
    total_tokens: g.ids.length + stats.generatedTokens,
    prompt_tokens_details: { cached_tokens: stats.cachedTokens ?? 0 },
  };
}

const finishReason = (stats) => (stats.stopReason === 'length' || stats.stopReason === 'context' ? 'length' : 'stop');

/**
 * A streamed reply, as the openai client's Stream: an async iterable of chunks, with `controller`
 * (an AbortController) to stop it. Breaking out of the iteration stops the generation too.
 */
export class Stream {
  constructor(iterate, controller) {
    this.iterate = iterate;
    this.controller = controller;
  }

  [Symbol.asyncIterator]() {
    return this.iterate();
  }
}

class Request {
  constructor(k, kind, body, options) {
    this.k = k;
    this.rq = kind === 'chat' ? parseChatRequest(body) : parseCompletionRequest(body);
    this.controller = new AbortController();
    this.signal = linkSignal(this.controller, body?.signal, options?.signal);
    if (this.signal.aborted) throw abortError();
    this.head = {
      id: randomId(kind === 'chat' ? 'chatcmpl-' : 'cmpl-'),
      object: kind === 'chat' ? 'chat.completion' : 'text_completion',
      created: Math.floor(Date.now() / 1000),
      model: this.rq.model || 'krafla',
      system_fingerprint: `krafla-${k.build?.name ?? 'wasm'}`,
    };
  }

  async whole() {
    const g = await start(this.k, this.rq, this.signal);
    let text = '';
    for await (const p of pieces(g, this.signal)) {
      if (p.text !== undefined) { text += p.text; continue; }
      const choice = this.rq.kind === 'chat'
        ? { index: 0, message: { role: 'assistant', content: text, refusal: null }, logprobs: null, finish_reason: finishReason(p.stats) }
        : { text, index: 0, logprobs: null, finish_reason: finishReason(p.stats) };
      return { ...this.head, choices: [choice], usage: usage(g, p.stats) };
    }
    throw new KraflaError('krafla: the generation ended without its statistics', 'error');
  }

  chunk(delta, finish) {
    const head = { ...this.head, object: this.rq.kind === 'chat' ? 'chat.completion.chunk' : 'text_completion' };
    const choice = this.rq.kind === 'chat'
      ? { index: 0, delta, logprobs: null, finish_reason: finish }
      : { text: delta.content ?? '', index: 0, logprobs: null, finish_reason: finish };
    return { ...head, choices: [choice], ...(this.rq.includeUsage ? { usage: null } : {}) };
  }

  async stream() {
    const g = await start(this.k, this.rq, this.signal);
    const self = this;
    const chat = this.rq.kind === 'chat';
    async function* chunks() {
      const it = pieces(g, self.signal);
      try {
        if (chat) yield self.chunk({ role: 'assistant', content: '' }, null);
        for await (const p of it) {
          if (p.text !== undefined) {
            if (p.text) yield self.chunk({ content: p.text }, null);
            continue;
          }
          yield self.chunk(chat ? {} : { content: '' }, finishReason(p.stats));
          if (self.rq.includeUsage) {
            yield { ...self.chunk({}, null), choices: [], usage: usage(g, p.stats) };
          }
        }
      } finally {
        await g.it.return?.(); // a consumer that stops early stops the generation
      }
    }
    return new Stream(chunks, this.controller);
  }
}

/** k.chat.completions: create(body, {signal}) as the openai client's chat.completions.create. */
export class ChatCompletions {
  constructor(k) { this.k = k; }

  async create(body, options = {}) {
    const r = new Request(this.k, 'chat', body, options);
    return r.rq.stream ? r.stream() : r.whole();
  }
}

/** k.completions: create(body, {signal}) as the openai client's completions.create (raw prompts). */
export class Completions {
  constructor(k) { this.k = k; }

  async create(body, options = {}) {
    const r = new Request(this.k, 'completion', body, options);
    return r.rq.stream ? r.stream() : r.whole();
  }
}
