// Types of k.chat.completions and k.completions (src/chat.js): the openai client's request and
// response shapes, with ml_server's fields (docs/server.md "Requests"), so that code written
// against `new OpenAI({baseURL: ml_server})` type-checks against a Krafla instance unchanged.
import type { KraflaErrorKind } from './index.js';

/** A message as ml_server takes it: content a string or text parts (joined with "\n"). */
export interface ChatCompletionMessageParam {
  /** 'developer' reaches the template as 'system'; 'tool' and 'function' are refused (no tools). */
  role: 'system' | 'developer' | 'user' | 'assistant';
  /** Required but for 'assistant' (null or absent: ""). */
  content?: string | Array<{ type: 'text'; text: string }> | null;
  name?: string;
  /** Empty or absent only. */
  tool_calls?: never[];
}

/** The fields both endpoints share, with ml_server's defaults and ranges. null means the default. */
export interface SamplingParams {
  /** Echoed in the response (default 'krafla'). */
  model?: string | null;
  /** 1 .. 2^31-1. Chat default: until an end-of-turn token or the context ends; completions: 16. */
  max_tokens?: number | null;
  /** 0 .. 2, default 1; 0 is greedy. */
  temperature?: number | null;
  /** 0 .. 1, default 1 (off); 0 keeps only the most probable token. */
  top_p?: number | null;
  /** llama-server's extension: 0 (default) is off. */
  top_k?: number | null;
  /** llama-server's extension: 0 .. <1, default 0 (off). */
  min_p?: number | null;
  /** -2 .. 2, default 0 (OpenAI's definition). */
  presence_penalty?: number | null;
  /** -2 .. 2, default 0 (OpenAI's definition). */
  frequency_penalty?: number | null;
  /** -2^63 .. 2^64-1 (a negative seed is its 64-bit two's complement); default: a random one. */
  seed?: number | bigint | null;
  /** At most 4, each non-empty, without U+0000: the reply ends before the first match. */
  stop?: string | string[] | null;
  /** Only with stream: true. include_usage adds a last chunk with choices [] and the usage. */
  stream_options?: { include_usage?: boolean | null } | null;
  /** 1 only. */
  n?: number | null;
  /** {} only. */
  logit_bias?: Record<string, number> | null;
  /** Aborting rejects (or ends the stream) with a KraflaError of kind 'abort', "Request was aborted."; the engine stays ready. Also accepted as the second argument's signal, as the openai client takes it. */
  signal?: AbortSignal;
  /** Other members are ignored, as ml_server ignores unknown fields. */
  [key: string]: unknown;
}

export interface ChatCompletionCreateParamsBase extends SamplingParams {
  messages: ChatCompletionMessageParam[];
  /** Wins over max_tokens. */
  max_completion_tokens?: number | null;
  /** false only in the browser (ml_server returns log-probabilities). */
  logprobs?: boolean | null;
  top_logprobs?: number | null;
  /** {type: 'text'} only. */
  response_format?: { type: 'text' | 'json_object' | 'json_schema' } | null;
  /** llama-server's extension: extra chat template variables ({enable_thinking: false}). */
  chat_template_kwargs?: Record<string, unknown> | null;
  /** Empty only: no tools. */
  tools?: never[] | null;
  tool_choice?: 'none' | 'auto' | null;
}
export interface ChatCompletionCreateParamsNonStreaming extends ChatCompletionCreateParamsBase { stream?: false | null }
export interface ChatCompletionCreateParamsStreaming extends ChatCompletionCreateParamsBase { stream: true }

export interface CompletionCreateParamsBase extends SamplingParams {
  /** A string, an array of one string, token ids, or an array of one array of token ids. Text gets the tokenizer's BOS. */
  prompt: string | [string] | number[] | [number[]];
  echo?: false | null;
  suffix?: '' | null;
  best_of?: 1 | null;
  /** null only in the browser. */
  logprobs?: null;
}
export interface CompletionCreateParamsNonStreaming extends CompletionCreateParamsBase { stream?: false | null }
export interface CompletionCreateParamsStreaming extends CompletionCreateParamsBase { stream: true }

export interface RequestOptions {
  signal?: AbortSignal;
}

export interface CompletionUsage {
  /** The whole prompt, reused tokens included. */
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  /** cached_tokens: prompt tokens whose KV came from the previous request (a chat turn's earlier turns), not evaluated again. */
  prompt_tokens_details: { cached_tokens: number };
}

/** 'stop': an end-of-turn token, a stop string; 'length': max_tokens or the context. */
export type FinishReason = 'stop' | 'length';

interface ResponseHead {
  id: string;
  created: number;
  model: string;
  /** 'krafla-' and the wasm build. */
  system_fingerprint: string;
}

export interface ChatCompletion extends ResponseHead {
  object: 'chat.completion';
  choices: Array<{
    index: 0;
    message: { role: 'assistant'; content: string; refusal: null };
    logprobs: null;
    finish_reason: FinishReason;
  }>;
  usage: CompletionUsage;
}

export interface ChatCompletionChunk extends ResponseHead {
  object: 'chat.completion.chunk';
  /** Empty in the usage chunk (stream_options.include_usage). */
  choices: Array<{
    index: 0;
    /** The first: {role: 'assistant', content: ''}; then {content}; the last: {} with finish_reason. */
    delta: { role?: 'assistant'; content?: string };
    logprobs: null;
    finish_reason: FinishReason | null;
  }>;
  /** With include_usage: null on every chunk but the last. */
  usage?: CompletionUsage | null;
}

export interface Completion extends ResponseHead {
  object: 'text_completion';
  /** Empty in a stream's usage chunk. */
  choices: Array<{ text: string; index: 0; logprobs: null; finish_reason: FinishReason | null }>;
  usage?: CompletionUsage | null;
}

/** A streamed reply, as the openai client's Stream: iterate it; controller.abort() stops it. */
export interface Stream<T> extends AsyncIterable<T> {
  controller: AbortController;
}

/**
 * A request ml_server would refuse, refused the same way: kind 'arg', the HTTP status ml_server
 * answers, and OpenAI's error body (also spread on the error, as the openai client's APIError).
 */
export interface KraflaApiError extends Error {
  kind: KraflaErrorKind;
  status: number;
  type: string;
  param: string | null;
  code: string | null;
  error: { message: string; type: string; param: string | null; code: string | null };
}

export interface ChatCompletions {
  create(body: ChatCompletionCreateParamsNonStreaming, options?: RequestOptions): Promise<ChatCompletion>;
  create(body: ChatCompletionCreateParamsStreaming, options?: RequestOptions): Promise<Stream<ChatCompletionChunk>>;
  create(body: ChatCompletionCreateParamsBase, options?: RequestOptions): Promise<ChatCompletion | Stream<ChatCompletionChunk>>;
}

export interface Completions {
  create(body: CompletionCreateParamsNonStreaming, options?: RequestOptions): Promise<Completion>;
  create(body: CompletionCreateParamsStreaming, options?: RequestOptions): Promise<Stream<Completion>>;
  create(body: CompletionCreateParamsBase, options?: RequestOptions): Promise<Completion | Stream<Completion>>;
}
