// Types of the krafla package (hand-written; the implementation is plain ES modules).
import type { ChatCompletions, Completions } from './chat-types.js';
export * from './chat-types.js';

/** A wasm build of the engine: its kernels and whether it runs pthreads. */
export type BuildName =
  | 'wasm_relaxed_mt' | 'wasm_relaxed'
  | 'wasm_simd128_mt' | 'wasm_simd128'
  | 'wasm_scalar_mt' | 'wasm_scalar';

export const BUILD_ORDER: readonly BuildName[];

export interface Features {
  wasm: boolean;
  simd128: boolean;
  relaxedSimd: boolean;
  crossOriginIsolated: boolean;
  sharedMemory: boolean;
  /** Shared memory and cross-origin isolation (always in node). */
  threads: boolean;
  /** Logical cores (node 20, which has no navigator: 0 here; the worker asks os.availableParallelism()). */
  hardwareConcurrency: number;
  node: boolean;
}

export interface BuildChoice {
  name: BuildName;
  /** 'relaxed' | 'simd128' | 'scalar' */
  isa: string;
  threaded: boolean;
  /** Why this build: the features found and the builds skipped. */
  reason: string;
}

export interface BuildInfo extends BuildChoice {
  /** The kernel ISA the module reports ('scalar', 'wasm_simd128', ...). */
  kernels: string;
  /** Packed-kernel row group, 0 when the build has none. */
  packG: number;
  /** Threads a generation uses (the worker plus nThreads - 1 pthreads). */
  nThreads: number;
  features: Features;
}

export interface CreateOptions {
  /** false: no threaded build; a number: that many threads (threaded builds only). Default: up to 4. */
  threads?: boolean | number;
  /** Force one build (still checked against the features). */
  build?: BuildName;
  /** The builds present (default: read dist/builds.json). */
  builds?: BuildName[];
  /** Where the builds are (default: the package's dist/). */
  distUrl?: string | URL;
  /** false: run the engine in this thread (node), not in a worker. Default: a worker. */
  worker?: boolean;
}

export type ModelSource = string | URL | ArrayBuffer | ArrayBufferView | Blob;

/**
 * A Hugging Face model folder: config.json, model.safetensors (or model.safetensors.index.json and
 * its shards) and tokenizer.json, with tokenizer_config.json and generation_config.json when present.
 * The engine converts it at load (Q8), as `ml_run FOLDER` does.
 */
export interface HfFolder {
  /**
   * A folder URL ('https://huggingface.co/ORG/NAME/resolve/main/', '/models/x/', './x/'; a path in
   * node), a repo id on huggingface.co ('ORG/NAME'), the files picked with
   * `<input type="file" webkitdirectory>` (its FileList, or an array of Files), or an object from
   * file name to source ({'config.json': url, 'model.safetensors': blob, ...}).
   */
  hf: string | URL | FileList | readonly File[] | Readonly<Record<string, ModelSource>>;
  /** With a repo id: the branch, tag or commit (default 'main'). */
  revision?: string;
}

export interface Progress {
  /** download, cache (read from Cache Storage), read (Blob/File/bytes), tokenizer, convert (llama2.c or a Hugging Face folder to .mlb), load (into wasm memory) */
  phase: 'download' | 'cache' | 'read' | 'tokenizer' | 'convert' | 'load';
  /** A Hugging Face folder's download, cache and read phases: the file (loaded and total are that file's bytes). */
  file?: string;
  loaded: number;
  /** 0 when unknown (no Content-Length). */
  total: number;
  /** loaded / total, or null when the total is unknown. */
  fraction: number | null;
}

export interface LoadOptions {
  /** The llama2.c tokenizer.bin that goes with a llama2.c checkpoint (converted to .mlb in the worker); not with a Hugging Face folder. */
  tokenizer?: ModelSource;
  onProgress?: (p: Progress) => void;
  /** Context length; 0 = the model's max_seq. */
  ctx?: number;
  /**
   * The model cache (see ModelCache): true for 'krafla-models', or a cache name. URL downloads (and
   * conversions) are kept there once the engine has opened them, and reused (offline too); a cached
   * copy that fails to open is deleted. A Hugging Face folder's files are kept under their own URLs
   * (stored as they arrive, removed again if the load fails). Default: false.
   */
  cache?: string | boolean;
  /** Refuse models whose estimated wasm memory exceeds this (default and cap: 4 GiB, wasm32). */
  maxMemoryBytes?: number;
}

export interface ModelInfo {
  vocabSize: number; ctx: number; maxSeq: number; dim: number; hiddenDim: number; nLayers: number;
  nHeads: number; nKvHeads: number; headDim: number; wtype: 'q8' | 'q4'; bosId: number; eosId: number;
  hasTokenizer: boolean;
  /** The tokenizer carries a chat template (applyChatTemplate works without one of your own). */
  hasChatTemplate: boolean;
  /** 'hf' (tokenizer.json BPE), 'llama2c' (tokenizer.bin) or 'none'. */
  tokenizerKind: 'hf' | 'llama2c' | 'none';
  nThreads: number; batch: number; packG: number; stateBytes: number;
  packedBytes: number; modelBytes: number; isa: string;
  /** The bytes came from the model cache (Cache Storage or OPFS: Krafla.cache). */
  fromCache: boolean;
  build: BuildName;
}

/** One message of a conversation (OpenAI / transformers shape); other members reach the template as they are. */
export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool' | string;
  content: string;
  [key: string]: unknown;
}

export interface ChatTemplateOptions {
  /** Open the assistant's turn at the end (default true). */
  addGenerationPrompt?: boolean;
  /** Extra template variables, e.g. { enable_thinking: false } for Qwen3. */
  vars?: Record<string, unknown> | null;
  /** A Jinja chat template replacing the model's own. */
  chatTemplate?: string | null;
}

export interface GenerateOptions {
  /** Tokens to generate (default 256). */
  maxTokens?: number;
  /** 0 = greedy (default 1.0). */
  temperature?: number;
  /** 0 = off (default). */
  topK?: number;
  /** In (0, 1]; 1 = off (default 0.9). */
  topP?: number;
  /** In [0, 1): ids whose probability (after the temperature) is below minP times the top one's are dropped; 0 = off (default). */
  minP?: number;
  /** In [-2, 2]: subtracted once from the logit of every id this generation has sampled; 0 = off (default). */
  presencePenalty?: number;
  /** In [-2, 2]: subtracted from an id's logit once per time this generation has sampled it; 0 = off (default). */
  frequencyPenalty?: number;
  /** The sampler's seed, up to 2^64 - 1 (default: random; reported in the stats). */
  seed?: number | bigint;
  /** Stop strings: generation ends before the first one (it is not returned). */
  stop?: string | string[];
  /**
   * Aborting ends the iteration at once: nothing more is yielded (nor passed to onToken), the
   * engine stops within one token, and the return value has stopReason 'abort'. An already-aborted
   * signal ends it with no text and generatedTokens 0 (bad options still throw).
   */
  signal?: AbortSignal;
  /** Prepend BOS (default true). */
  addBos?: boolean;
  /** Use these prompt ids instead of tokenizing the prompt. */
  tokens?: number[];
  /** Keep the KV of the longest prefix these prompt ids share with the tokens the engine holds from the previous generation, and evaluate only the rest (stats.cachedTokens counts the kept ones). Default false. */
  reusePrefix?: boolean;
  onStats?: (s: GenerateStats) => void;
  /** Called as each token's event arrives (before the iterator yields it; never after an abort): n counts the tokens generated so far; text may be ''. */
  onToken?: (t: { n: number; text: string }) => void;
}

export interface GenerateStats {
  /** Prompt tokens evaluated (with reusePrefix: those after the reused prefix). */
  promptTokens: number;
  /** Prompt tokens whose KV was reused from the previous generation (reusePrefix), not evaluated. */
  cachedTokens: number;
  generatedTokens: number;
  promptSeconds: number;
  /** Time spent in wasm on the generated tokens. */
  decodeSeconds: number;
  wallSeconds: number;
  promptTokensPerSecond: number;
  tokensPerSecond: number;
  stopReason: 'length' | 'eos' | 'context' | 'stop' | 'abort';
  seed: string;
  build: BuildName;
}

export interface BenchResult {
  promptTokens: number; decodeTokens: number;
  prefillTokensPerSecond: number; decodeTokensPerSecond: number;
  build: BuildName; nThreads: number;
}

/**
 * What went wrong: the engine's status (io: a download, a file or the cache; format: not a model,
 * or a damaged one; shape: dimensions the engine cannot run; nomem: it does not fit; isa: the
 * kernels need a CPU feature; arg: a bad argument), or state (no model loaded, terminated),
 * setup (no wasm build), crash (the worker died), error (anything else), abort (a chat or
 * completions request whose signal was aborted: chat.js).
 */
export type KraflaErrorKind = 'io' | 'format' | 'shape' | 'nomem' | 'isa' | 'arg' | 'state' | 'setup' | 'crash' | 'error' | 'abort';

export class KraflaError extends Error {
  constructor(message: string, kind?: KraflaErrorKind);
  kind: KraflaErrorKind;
}

/** One cached file: a model, a llama2.c conversion (`source`: the checkpoint's URL) or a folder's file. */
export interface CacheEntry {
  url: string;
  /** Bytes on disk. */
  size: number;
  /** 'opfs': the origin private file system (files of 32 MiB or more, where there is one); 'cache': Cache Storage. */
  storage: 'cache' | 'opfs';
  /** ISO time it was stored (null for entries written by older versions). */
  cachedAt: string | null;
  source?: string;
}

/**
 * Krafla.cache: the model cache a web app manages (Cache Storage as the index, OPFS for large
 * files). `cacheName` defaults to 'krafla-models'. A URL names its entry and its llama2.c
 * conversions; a URL ending in '/' (a Hugging Face folder) every file under it. Where there is no
 * Cache Storage (node) nothing is cached: list() is [], has() false, delete() false, clear() 0.
 */
export interface ModelCache {
  /** Cache Storage is there (a browser page or worker in a secure context). */
  readonly supported: boolean;
  /** The origin private file system is there. */
  readonly opfs: boolean;
  list(cacheName?: string): Promise<CacheEntry[]>;
  has(url: string | URL, cacheName?: string): Promise<boolean>;
  /** Resolves to whether anything was removed. */
  delete(url: string | URL, cacheName?: string): Promise<boolean>;
  /** Removes every entry; resolves to how many there were. */
  clear(cacheName?: string): Promise<number>;
  /** The bytes on disk of all entries. */
  size(cacheName?: string): Promise<number>;
}

export class Krafla {
  static create(options?: CreateOptions): Promise<Krafla>;
  static readonly cache: ModelCache;
  /** The openai client's chat.completions.create, answered by this engine as ml_server answers it (chat-types.d.ts). */
  readonly chat: { readonly completions: ChatCompletions };
  /** The openai client's completions.create (raw prompts), as ml_server's /v1/completions. */
  readonly completions: Completions;
  readonly build: BuildInfo;
  readonly model: ModelInfo | null;
  /** The last generation's stats (an aborted one's too, after a `break`); null while one runs. */
  readonly lastStats: GenerateStats | null;
  /**
   * Loads a model: an .mlb, a GGUF file, a llama2.c checkpoint (with options.tokenizer), or a
   * Hugging Face folder ({hf}). A URL whose body ends short of its Content-Length or runs past it fails with kind 'io'.
   * A load that fails before the engine opens the new model keeps the model loaded before (`model` stays set).
   */
  load(source: ModelSource | HfFolder, options?: LoadOptions): Promise<ModelInfo>;
  /** encode(text, add_special_tokens) of the model's tokenizer (addBos: the older name of addSpecial). */
  tokenize(text: string, options?: { addSpecial?: boolean; addBos?: boolean }): Promise<number[]>;
  /** decode(ids, skip_special_tokens) of the model's tokenizer. */
  detokenize(ids: ArrayLike<number>, options?: { skipSpecial?: boolean }): Promise<string>;
  /** The model's chat template over the messages, as transformers' apply_chat_template(tokenize=False). */
  applyChatTemplate(messages: ChatMessage[], options?: ChatTemplateOptions): Promise<string>;
  /** Text pieces as they are generated; never splits a UTF-8 character. Returns the stats. */
  generate(prompt: string, options?: GenerateOptions): AsyncGenerator<string, GenerateStats, void>;
  complete(prompt: string, options?: GenerateOptions): Promise<{ text: string; stats: GenerateStats }>;
  bench(options?: { prompt?: number; decode?: number; reps?: number }): Promise<BenchResult>;
  unload(): Promise<void>;
  terminate(): void;
}

export interface ModelHeader {
  /** 'gguf': the engine converts the file at load; only `kind` (and `version`) are read from its header. */
  kind: 'mlb' | 'llama2c' | 'gguf';
  dim: number; hiddenDim: number; nLayers: number; nHeads: number; nKvHeads: number; headDim: number;
  vocabSize: number; maxSeq: number; wtype: number; fileSize: number;
}

export function detectFeatures(): Features;
export function chooseBuild(available: BuildName[], features: Features, options?: { threads?: boolean | number; force?: BuildName }): BuildChoice;
export function parseHeader(bytes: ArrayBuffer | Uint8Array, name?: string): ModelHeader;
export function estimateMemory(h: ModelHeader, options?: { packed?: boolean; ctx?: number }): number;
export function checkFits(h: ModelHeader, name: string, options?: { limit?: number; packed?: boolean; ctx?: number }): number;
export const WASM32_MAX_BYTES: number;
