// OpenAI request bodies to plain fields, with ml_server's rules: the same field names, defaults,
// ranges, refusals and error wording (native/server/api_request.cpp and api_fields.cpp, listed in
// docs/server.md "Requests" and "Errors"), so that a request refused by one is refused by the
// other with the same message, param and code. What the in-browser engine cannot do yet
// (logprobs) is refused too, naming the field, rather than ignored.
import { KraflaError } from './errors.js';

const MAX_INT32 = 2147483647;
const FLT_MIN = 1.1754943508222875e-38; // the smallest normal float: top_p 0 keeps the top token

/**
 * OpenAI's error as a KraflaError (kind 'arg' for a refused request): `error` is the body's
 * {message, type, param, code}, also spread on the error itself with the HTTP `status` ml_server
 * would answer, as the openai client's APIError carries them.
 */
export function apiError(status, message, type = 'invalid_request_error', param = null, code = null, kind = 'arg') {
  const e = new KraflaError(message, kind);
  e.status = status;
  e.type = type;
  e.param = param || null;
  e.code = code || null;
  e.error = { message, type, param: e.param, code: e.code };
  return e;
}

function refuse(param, code, message) {
  throw apiError(400, message, 'invalid_request_error', param, code);
}

// "a string", "an integer", "a decimal", "a boolean", "an object", "an array", "null" (JSON's);
// JavaScript values JSON has not are named as they are (NaN, undefined is never seen: absent).
export function typeName(v) {
  if (v === null) return 'null';
  switch (typeof v) {
    case 'boolean': return 'a boolean';
    case 'bigint': return 'an integer';
    case 'number': return !Number.isFinite(v) ? String(v) : Number.isInteger(v) ? 'an integer' : 'a decimal';
    case 'string': return 'a string';
    case 'object': return Array.isArray(v) ? 'an array' : 'an object';
    default: return `a ${typeof v}`;
  }
}

const utf8 = new TextEncoder();

// What was sent, for a message: a string in single quotes (cut to 64 bytes, its size named), a
// number or literal as JSON, a container by its type name.
export function quoteValue(v) {
  if (v !== null && typeof v === 'object') return typeName(v);
  if (typeof v !== 'string') return String(v);
  const b = utf8.encode(v);
  if (b.length <= 64) return `'${v}'`;
  let cut = 64;
  while (cut > 0 && (b[cut] & 0xc0) === 0x80) --cut; // a whole character
  return `'${new TextDecoder().decode(b.subarray(0, cut))}...' (${b.length} bytes)`;
}

const pathOf = (parent, key) => (typeof key === 'number' ? `${parent}[${key}]` : parent ? `${parent}.${key}` : key);

function integerAt(v, path, lo, hi) {
  const below = () => refuse(path, 'integer_below_min_value',
    `Invalid '${path}': integer below minimum value. Expected a value >= ${lo}, but got ${quoteValue(v)} instead.`);
  const above = () => refuse(path, 'integer_above_max_value',
    `Invalid '${path}': integer above maximum value. Expected a value <= ${hi}, but got ${quoteValue(v)} instead.`);
  if (typeof v === 'bigint' || (typeof v === 'number' && Number.isFinite(v))) {
    if (typeof v === 'number' && Math.floor(v) !== v) {
      refuse(path, 'invalid_type', `Invalid type for '${path}': expected an integer, but got a decimal (${quoteValue(v)}) instead.`);
    }
    if (v < lo) below();
    if (v > hi) above();
    return Number(v);
  }
  refuse(path, 'invalid_type', `Invalid type for '${path}': expected an integer, but got ${typeName(v)} instead.`);
}

// One object's fields. get() is null for a member that is absent, undefined or null (OpenAI's
// optional fields all take null for "the default").
class Fields {
  constructor(obj, path) { this.obj = obj; this.at = path; }
  get(key) { const v = Object.hasOwn(this.obj, key) ? this.obj[key] : undefined; return v ?? null; }
  path(key) { return pathOf(this.at, key); }
  need(key) {
    const v = this.get(key);
    if (v === null) refuse(this.path(key), 'missing_required_parameter', `Missing required parameter: '${this.path(key)}'.`);
    return v;
  }
  expect(key, v, ok, expected) {
    if (!ok) refuse(this.path(key), 'invalid_type', `Invalid type for '${this.path(key)}': expected ${expected}, but got ${typeName(v)} instead.`);
  }
  boolean(key) {
    const v = this.get(key);
    if (v !== null) this.expect(key, v, typeof v === 'boolean', 'a boolean');
    return v;
  }
  string(key) {
    const v = this.get(key);
    if (v !== null) this.expect(key, v, typeof v === 'string', 'a string');
    return v;
  }
  integer(key, lo, hi) {
    const v = this.get(key);
    return v === null ? null : integerAt(v, this.path(key), lo, hi);
  }
  // A number in [lo, hi], either bound exclusive when openLo / openHi.
  number(key, lo, openLo, hi, openHi) {
    const v = this.get(key);
    if (v === null) return null;
    this.expect(key, v, typeof v === 'number' && Number.isFinite(v), 'a number');
    const p = this.path(key);
    if (v < lo || (openLo && v === lo)) {
      refuse(p, 'decimal_below_min_value', `Invalid '${p}': decimal below minimum value. Expected a value ${openLo ? '> ' : '>= '}${lo}, but got ${quoteValue(v)} instead.`);
    }
    if (v > hi || (openHi && v === hi)) {
      refuse(p, 'decimal_above_max_value', `Invalid '${p}': decimal above maximum value. Expected a value ${openHi ? '< ' : '<= '}${hi}, but got ${quoteValue(v)} instead.`);
    }
    return v;
  }
}

const unsupportedParameter = (param, why) => refuse(param, 'unsupported_parameter', `Unsupported parameter: '${param}'. ${why}`);
const unsupportedValue = (param, v, why) => refuse(param, 'unsupported_value', `Unsupported value for '${param}': ${quoteValue(v)}. ${why}`);
const invalidValue = (param, v, supported) => refuse(param, 'invalid_value', `Invalid value for '${param}': ${quoteValue(v)}. Supported values are: ${supported}.`);

// What ml_server takes and the package does not (logprobs: the worker sends no distributions):
// refused at any value but the default, as an option that is silently ignored gives a reply the
// caller did not ask for.
const notInBrowser = (param, v) => refuse(param, 'unsupported_value',
  `Unsupported value for '${param}': ${quoteValue(v)}. The in-browser engine does not implement '${param}' yet (ml_server does).`);

// seed: any integer in [-2^63, 2^64 - 1] (a bigint too); a negative one as its two's complement.
function readSeed(f) {
  const v = f.get('seed');
  if (v === null) return null;
  const p = f.path('seed');
  if (typeof v === 'number' && Number.isFinite(v) && !Number.isInteger(v)) {
    refuse(p, 'invalid_type', `Invalid type for 'seed': expected an integer, but got a decimal (${quoteValue(v)}) instead.`);
  }
  if (typeof v === 'number' && Number.isFinite(v) || typeof v === 'bigint') {
    const b = BigInt(v);
    if (b < -(2n ** 63n) || b >= 2n ** 64n) {
      refuse(p, 'integer_above_max_value', `Invalid 'seed': ${quoteValue(v)} is outside the 64-bit integers [-2^63, 2^64 - 1].`);
    }
    return BigInt.asUintN(64, b);
  }
  f.expect('seed', v, false, 'an integer');
}

function readStop(f) {
  const v = f.get('stop');
  if (v === null) return [];
  const one = (s, p) => {
    if (s.length === 0) refuse(p, 'invalid_value', `Invalid '${p}': empty string. A stop sequence needs at least one character.`);
    if (s.includes('\0')) refuse(p, 'invalid_value', `Invalid '${p}': a stop sequence may not contain U+0000.`);
    return s;
  };
  if (typeof v === 'string') return [one(v, f.path('stop'))];
  f.expect('stop', v, Array.isArray(v), 'one of a string or array of strings');
  if (v.length > 4) {
    refuse(f.path('stop'), 'array_above_max_length',
      `Invalid 'stop': array too long. Expected an array with maximum length 4, but got an array with length ${v.length} instead.`);
  }
  return v.map((s, i) => {
    const p = pathOf(f.path('stop'), i);
    if (typeof s !== 'string') refuse(p, 'invalid_type', `Invalid type for '${p}': expected a string, but got ${typeName(s)} instead.`);
    return one(s, p);
  });
}

// The fields both endpoints share: sampling, stop, stream, n, and the refusals of what would
// change the output if it were ignored.
function readCommon(f, rq) {
  const model = f.string('model');
  if (model !== null) rq.model = model;
  const maxTokens = f.integer('max_tokens', 1, MAX_INT32);
  if (maxTokens !== null) rq.maxTokens = maxTokens;
  rq.temperature = f.number('temperature', 0, false, 2, false) ?? 1;
  const topP = f.number('top_p', 0, false, 1, false);
  if (topP !== null) rq.topP = Math.max(topP, FLT_MIN);
  rq.topK = f.integer('top_k', 0, MAX_INT32) ?? 0;
  rq.minP = f.number('min_p', 0, false, 1, true) ?? 0;
  rq.presencePenalty = f.number('presence_penalty', -2, false, 2, false) ?? 0;
  rq.frequencyPenalty = f.number('frequency_penalty', -2, false, 2, false) ?? 0;
  rq.seed = readSeed(f);
  rq.stop = readStop(f);
  rq.stream = f.boolean('stream') ?? false;
  const so = f.get('stream_options');
  if (so !== null) {
    f.expect('stream_options', so, typeof so === 'object' && !Array.isArray(so), 'an object');
    if (!rq.stream) refuse(f.path('stream_options'), 'invalid_value', "Invalid 'stream_options': it is only allowed when 'stream' is true.");
    rq.includeUsage = new Fields(so, f.path('stream_options')).boolean('include_usage') ?? false;
  }
  const n = f.get('n');
  if (n !== null && integerAt(n, f.path('n'), -MAX_INT32 - 1, MAX_INT32) !== 1) {
    unsupportedValue(f.path('n'), n, "This server returns one choice per request: 'n' must be 1.");
  }
  const bias = f.get('logit_bias');
  if (bias !== null) {
    f.expect('logit_bias', bias, typeof bias === 'object' && !Array.isArray(bias), 'an object');
    if (Object.keys(bias).length) unsupportedParameter(f.path('logit_bias'), 'This server does not bias token logits.');
  }
  for (const key of ['grammar', 'json_schema']) {
    if (f.get(key) !== null) unsupportedParameter(f.path(key), 'This server does not constrain its output.');
  }
  // Valid for ml_server, but not for this engine: checked after everything ml_server checks.
  rq.notInBrowser = [];
}

// One message's content: a string, or an array of text parts joined by "\n"; null or absent only
// for an assistant message ("").
function readContent(mf, assistant) {
  if (assistant && mf.get('content') === null) return '';
  const c = mf.need('content');
  if (typeof c === 'string') return c;
  mf.expect('content', c, Array.isArray(c), 'one of a string or array of objects');
  const cp = mf.path('content');
  if (!c.length) refuse(cp, 'empty_array', `Invalid '${cp}': empty array. Expected an array with minimum length 1, but got an empty array instead.`);
  return c.map((part, j) => {
    const pp = pathOf(cp, j);
    if (part === null || typeof part !== 'object' || Array.isArray(part)) {
      refuse(pp, 'invalid_type', `Invalid type for '${pp}': expected an object, but got ${typeName(part)} instead.`);
    }
    const pf = new Fields(part, pp);
    const type = pf.need('type');
    pf.expect('type', type, typeof type === 'string', 'a string');
    if (type !== 'text') {
      if (['image_url', 'input_audio', 'file', 'refusal'].includes(type)) {
        unsupportedValue(pf.path('type'), type, `This server reads text parts only (content part ${j}).`);
      }
      invalidValue(pf.path('type'), type, "'text'");
    }
    const body = pf.need('text');
    pf.expect('text', body, typeof body === 'string', 'a string');
    return body;
  }).join('\n');
}

// messages: [{role, content}] for the chat template: developer becomes system, other members are
// dropped, as ml_server hands them to ml_chat_apply.
function readMessages(f) {
  const m = f.need('messages');
  f.expect('messages', m, Array.isArray(m), 'an array');
  if (!m.length) {
    refuse(f.path('messages'), 'empty_array', "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.");
  }
  return m.map((msg, i) => {
    const p = pathOf(f.path('messages'), i);
    if (msg === null || typeof msg !== 'object' || Array.isArray(msg)) {
      refuse(p, 'invalid_type', `Invalid type for '${p}': expected an object, but got ${typeName(msg)} instead.`);
    }
    const mf = new Fields(msg, p);
    const role = mf.need('role');
    mf.expect('role', role, typeof role === 'string', 'a string');
    if (role === 'tool' || role === 'function') {
      unsupportedValue(mf.path('role'), role, 'This server does not call tools, so it reads no tool results.');
    }
    if (!['system', 'developer', 'user', 'assistant'].includes(role)) {
      invalidValue(mf.path('role'), role, "'system', 'developer', 'user', and 'assistant'");
    }
    const calls = mf.get('tool_calls');
    if (calls !== null && (!Array.isArray(calls) || calls.length)) unsupportedParameter(mf.path('tool_calls'), 'This server does not call tools.');
    if (mf.get('function_call') !== null) unsupportedParameter(mf.path('function_call'), 'This server does not call functions.');
    return { role: role === 'developer' ? 'system' : role, content: readContent(mf, role === 'assistant') };
  });
}

function refuseTools(f) {
  for (const key of ['tools', 'functions']) {
    const v = f.get(key);
    if (v === null) continue;
    f.expect(key, v, Array.isArray(v), 'an array');
    if (v.length) unsupportedParameter(f.path(key), 'This server does not call tools.');
  }
  for (const key of ['tool_choice', 'function_call']) {
    const v = f.get(key);
    if (v === null) continue;
    if (typeof v === 'object' && !Array.isArray(v)) unsupportedValue(f.path(key), v, 'This server does not call tools.');
    f.expect(key, v, typeof v === 'string', 'one of a string or object');
    if (v === 'required') unsupportedValue(f.path(key), v, 'This server does not call tools.');
    if (v !== 'none' && v !== 'auto') invalidValue(f.path(key), v, "'none', 'auto', and 'required'");
  }
}

function readResponseFormat(f) {
  const v = f.get('response_format');
  if (v === null) return;
  f.expect('response_format', v, typeof v === 'object' && !Array.isArray(v), 'an object');
  const rf = new Fields(v, f.path('response_format'));
  const type = rf.need('type');
  rf.expect('type', type, typeof type === 'string', 'a string');
  if (type === 'json_object' || type === 'json_schema') {
    unsupportedValue(rf.path('type'), type, "This server does not constrain its output to JSON yet; use 'text'.");
  }
  if (type !== 'text') invalidValue(rf.path('type'), type, "'text', 'json_object', and 'json_schema'");
}

function refuseAudio(f) {
  if (f.get('audio') !== null) unsupportedParameter(f.path('audio'), 'This server writes text only.');
  const v = f.get('modalities');
  if (v === null) return;
  f.expect('modalities', v, Array.isArray(v), 'an array');
  v.forEach((m, i) => {
    const p = pathOf(f.path('modalities'), i);
    if (typeof m !== 'string') refuse(p, 'invalid_type', `Invalid type for '${p}': expected a string, but got ${typeName(m)} instead.`);
    if (m !== 'text') unsupportedValue(p, m, 'This server writes text only.');
  });
}

function checkBody(body) {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    refuse(null, 'invalid_type', `Invalid type for the request body: expected an object, but got ${typeName(body ?? null)} instead.`);
  }
  return new Fields(body, '');
}

function finish(f, rq) {
  for (const [key, v] of rq.notInBrowser) notInBrowser(f.path(key), v);
  delete rq.notInBrowser;
  return rq;
}

/**
 * A chat.completions.create body to {messages, model, maxTokens (-1: until an end-of-turn token
 * or the context ends), temperature, topP, topK, seed (bigint or null), stop, stream,
 * includeUsage, vars}. Throws the KraflaError ml_server's refusal would be.
 */
export function parseChatRequest(body) {
  const f = checkBody(body);
  const rq = { kind: 'chat', model: '', maxTokens: -1, topP: 1, includeUsage: false, vars: null };
  rq.messages = readMessages(f);
  readCommon(f, rq);
  const mct = f.integer('max_completion_tokens', 1, MAX_INT32);
  if (mct !== null) rq.maxTokens = mct;
  const want = f.boolean('logprobs') ?? false;
  const top = f.integer('top_logprobs', 0, 20);
  if (top !== null && !want) refuse(f.path('top_logprobs'), 'invalid_value', "Invalid 'top_logprobs': it requires 'logprobs' to be true.");
  readResponseFormat(f);
  refuseTools(f);
  refuseAudio(f);
  const kw = f.get('chat_template_kwargs');
  if (kw !== null) {
    f.expect('chat_template_kwargs', kw, typeof kw === 'object' && !Array.isArray(kw), 'an object');
    rq.vars = kw;
  }
  if (want) rq.notInBrowser.push(['logprobs', true, false]);
  return finish(f, rq);
}

function readPrompt(f, rq) {
  const p = f.need('prompt');
  const pp = f.path('prompt');
  if (typeof p === 'string') { rq.prompt = p; return; }
  f.expect('prompt', p, Array.isArray(p), 'one of a string, array of strings, or array of integers');
  const emptyArray = (path) => refuse(path, 'empty_array', `Invalid '${path}': empty array. Expected an array with minimum length 1, but got an empty array instead.`);
  if (!p.length) emptyArray(pp);
  const ids = (a, path) => {
    if (!a.length) emptyArray(path);
    rq.promptIds = a.map((x, i) => integerAt(x, pathOf(path, i), 0, MAX_INT32));
  };
  if (typeof p[0] === 'number' || typeof p[0] === 'bigint') return ids(p, pp);
  if (typeof p[0] !== 'string' && !Array.isArray(p[0])) {
    refuse(pathOf(pp, 0), 'invalid_type', `Invalid type for '${pathOf(pp, 0)}': expected one of a string, integer, or array of integers, but got ${typeName(p[0])} instead.`);
  }
  if (p.length > 1) {
    refuse(pp, 'unsupported_value', `Unsupported value for 'prompt': a batch of ${p.length} prompts. This server completes one prompt per request; send one request per prompt.`);
  }
  if (typeof p[0] === 'string') { rq.prompt = p[0]; return; }
  ids(p[0], pathOf(pp, 0));
}

/** A completions.create body: as parseChatRequest, with prompt (text) or promptIds; maxTokens defaults to 16. */
export function parseCompletionRequest(body) {
  const f = checkBody(body);
  const rq = { kind: 'completion', model: '', maxTokens: 16, topP: 1, includeUsage: false, prompt: null, promptIds: null };
  readPrompt(f, rq);
  readCommon(f, rq);
  if (f.boolean('echo')) unsupportedValue(f.path('echo'), true, 'This server does not echo the prompt.');
  const suffix = f.string('suffix');
  if (suffix) unsupportedParameter(f.path('suffix'), 'This server does not insert text between a prompt and a suffix.');
  const bestOf = f.integer('best_of', -MAX_INT32 - 1, MAX_INT32);
  if (bestOf !== null && bestOf !== 1) unsupportedValue(f.path('best_of'), bestOf, "This server samples one completion: 'best_of' must be 1.");
  const lp = f.integer('logprobs', 0, 5);
  if (lp !== null) rq.notInBrowser.push(['logprobs', lp, null]);
  return finish(f, rq);
}
