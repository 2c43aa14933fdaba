#!/usr/bin/env node
// llama.cpp (node-llama-cpp 3.22.1, its prebuilt CPU binary) as an oracle: loads a GGUF file on the
// CPU, feeds the prompt token ids exactly as given (no tokenization, no BOS added) and generates n
// tokens greedily, one at a time. Prints one JSON object:
//   {tokens: [n generated ids], logits: [[vocab floats] per position] | absent, llama_cpp, threads}
// logits (with --logits) are llama.cpp's raw logits after each fed token: prompt positions
// 0..P-1 and then each generated token but the last (P + n - 1 rows), the same rows as
// `ml_run --tokens PROMPT+GENERATED[:-1] --dump-logits`. Every generated token is also checked to
// be the argmax of its logits row (the lowest id on a tie) when --logits is on. --tokens may be
// given several times: each prompt runs in turn on the same context, cleared in between
// (clearHistory), and prints its own object, one line each (a test that tries many prompts then
// starts node and loads the model once; each start costs about 1.4 s).
//
//   node llamacpp_run.mjs MODEL.gguf --tokens "1 2 3" [--tokens "4 5" ...] [-n 32] [-t 1] [--logits] [--ctx N] [--kv f16|f32]
//   node llamacpp_run.mjs MODEL.gguf --bench [--prefill 64] [--decode 128] [-t 1] [--runs 3]
//   node llamacpp_run.mjs MODEL.gguf --tokens "1 2 3 ..." --chunk N [-t 1] [--kv f16|f32]
//
// --chunk N (perplexity, e2e/cli/test_perplexity.py): the ids, a whole number of chunks of N, are
// fed chunk by chunk, each from an empty sequence (clearHistory), with the logits after every
// position; prints {logits: [[vocab floats] per id]}, no generation.
//
// --bench: `runs` times (the sequence cleared in between), evaluates `prefill` token ids (a fixed
// pseudo-random sequence) in one batch, then decodes `decode` tokens greedily. Prints
// {prefill_tok_s, decode_tok_s}: the best run, timed around the calls from JS (what a node user
// gets), and llama_{prefill,decode}_tok_s: the best run by llama.cpp's own perf counters
// (llama_perf_context, read and reset after each run), which leave out the binding's per-call cost.
//
// API used: getLlama({gpu: false, build: "never", usePrebuiltBinaries: true, skipDownload: true}),
// llama.loadModel({modelPath, gpuLayers: 0, useMmap: true}), model.createContext({contextSize,
// batchSize, threads: {ideal: t, min: t}, sequences: 1, flashAttention: false}),
// context.getSequence().controlledEvaluate(items): an item [id, {generateNext: {token: true,
// logits: true, options: {temperature: 0}}}] returns the sampled next token and the raw logits.
import process from 'node:process';
import path from 'node:path';

// Never build or download anything: the prebuilt binary from npm or a clear failure.
process.env.NODE_LLAMA_CPP_SKIP_DOWNLOAD = 'true';
const { getLlama, LlamaLogLevel } = await import('node-llama-cpp');

function usage(msg) {
  process.stderr.write(`llamacpp_run: ${msg}\nusage: llamacpp_run.mjs MODEL.gguf --tokens "ID ..." [-n N] [-t T] [--logits] [--ctx N] [--kv f16|f32]\n` +
                       `       llamacpp_run.mjs MODEL.gguf --bench [--prefill 64] [--decode 128] [-t T]\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const o = { model: null, prompts: [], chunk: 0, n: 32, threads: 1, logits: false, ctx: 0, bench: false, prefill: 64, decode: 128, kv: 'f16', runs: 3 };
  const int = (v, name) => {
    if (v === undefined || !/^\d+$/.test(v)) usage(`${name}: '${v}' is not a non-negative integer`);
    return Number(v);
  };
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    if (a === '--tokens') {
      const v = argv[++i];
      if (v === undefined) usage('--tokens needs a value');
      const ids = v.trim().split(/[\s,]+/).filter((s) => s.length).map((s) => int(s, '--tokens'));
      if (ids.length === 0) usage('--tokens: no ids given');
      o.prompts.push(ids);
    } else if (a === '-n') o.n = int(argv[++i], '-n');
    else if (a === '-t' || a === '--threads') o.threads = int(argv[++i], '-t');
    else if (a === '--ctx') o.ctx = int(argv[++i], '--ctx');
    else if (a === '--logits') o.logits = true;
    else if (a === '--chunk') o.chunk = int(argv[++i], '--chunk');
    else if (a === '--kv') {
      o.kv = argv[++i];
      if (o.kv !== 'f16' && o.kv !== 'f32') usage(`--kv: '${o.kv}' is not f16 or f32`);
    }
    else if (a === '--bench') o.bench = true;
    else if (a === '--prefill') o.prefill = int(argv[++i], '--prefill');
    else if (a === '--decode') o.decode = int(argv[++i], '--decode');
    else if (a === '--runs') o.runs = Math.max(int(argv[++i], '--runs'), 1);
    else if (a.startsWith('-')) usage(`unknown option ${a}`);
    else if (o.model === null) o.model = a;
    else usage(`unexpected argument ${a}`);
  }
  if (!o.model) usage('no model given');
  if (!o.bench && o.prompts.length === 0) usage('--tokens: no ids given');
  if (o.threads < 1) usage('-t must be >= 1');
  if (o.chunk && o.prompts.length > 1) usage('--chunk takes one --tokens');
  if (o.chunk && o.prompts.length && o.prompts[0].length % o.chunk !== 0) usage(`--chunk: ${o.prompts[0].length} ids are not a whole number of chunks of ${o.chunk}`);
  return o;
}

// The logits map (sorted by value) back into an array indexed by token id.
function logitsArray(map, vocab) {
  const out = new Array(vocab).fill(null);
  for (const [id, v] of map) out[id] = v;
  if (out.some((v) => v === null)) throw new Error('llama.cpp returned logits for only part of the vocabulary');
  return out;
}

function argmax(row) {
  let best = 0;
  for (let i = 1; i < row.length; ++i) if (row[i] > row[best]) best = i;
  return best;
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const logLines = [];
  const llama = await getLlama({
    gpu: false, build: 'never', usePrebuiltBinaries: true, skipDownload: true, progressLogs: false,
    logLevel: o.bench ? LlamaLogLevel.info : LlamaLogLevel.error, maxThreads: Math.max(o.threads, 1),
    logger: (level, message) => {
      if (o.bench) logLines.push(message);
      else if (level === LlamaLogLevel.error || level === LlamaLogLevel.fatal) process.stderr.write(message);
    },
  });
  const model = await llama.loadModel({ modelPath: path.resolve(o.model), gpuLayers: 0, useMmap: true });
  const longest = Math.max(0, ...o.prompts.map((p) => p.length));
  const need = o.bench ? o.prefill + o.decode + 1 : o.chunk ? o.chunk : longest + o.n + 1;
  const contextSize = Math.max(o.ctx || need, 32);
  const context = await model.createContext({
    contextSize, batchSize: Math.max(o.bench ? o.prefill : o.chunk || longest, 1), sequences: 1,
    threads: { ideal: o.threads, min: o.threads }, flashAttention: false,
    experimentalKvCacheKeyType: o.kv.toUpperCase(), experimentalKvCacheValueType: o.kv.toUpperCase(),
    performanceTracking: o.bench,
  });
  const seq = context.getSequence();
  const gen = (logits) => ({ generateNext: { token: true, logits, options: { temperature: 0 } } });

  if (o.bench) {
    // A fixed prompt of ids 3.. (wrapping below the vocabulary), so every run feeds the same batch.
    const vocabN = Math.max(model.fileInfo.metadata?.tokenizer?.ggml?.tokens?.length ?? 0, 4);
    const prompt = Array.from({ length: o.prefill }, (_, i) => 3 + ((i * 7919) % (vocabN - 3)));
    const items = prompt.map((id, i) => (i === prompt.length - 1 ? [id, gen(false)] : id));
    const s = (a, b) => Number(b - a) / 1e9;
    // llama.cpp's own counters: "prompt eval time = X ms / N tokens", "eval time = Y ms / M runs";
    // printTimings prints and resets them (llama_perf_context_print + _reset).
    const perf = (text, re) => {
      const m = text.match(re);
      return m ? Number(m[2]) / (Number(m[1]) / 1000) : 0;
    };
    let bestPrefill = Infinity, bestDecode = Infinity, ownPrefill = 0, ownDecode = 0;
    for (let run = 0; run < o.runs; ++run) {
      await seq.clearHistory();
      await context.printTimings();
      logLines.length = 0;
      const t0 = process.hrtime.bigint();
      const first = await seq.controlledEvaluate(items);
      const t1 = process.hrtime.bigint();
      let next = first[prompt.length - 1].next.token;
      for (let i = 0; i < o.decode; ++i) {
        const r = await seq.controlledEvaluate([[next, gen(false)]]);
        next = r[0].next.token;
      }
      const t2 = process.hrtime.bigint();
      bestPrefill = Math.min(bestPrefill, s(t0, t1));
      bestDecode = Math.min(bestDecode, s(t1, t2));
      logLines.length = 0;
      await context.printTimings();
      const text = logLines.join('');
      ownPrefill = Math.max(ownPrefill, perf(text, /prompt eval time =\s*([\d.]+) ms \/\s*(\d+) tokens/));
      ownDecode = Math.max(ownDecode, perf(text, /\beval time =\s*([\d.]+) ms \/\s*(\d+) runs/));
    }
    process.stdout.write(JSON.stringify({
      prefill_tok_s: o.prefill / bestPrefill, decode_tok_s: o.decode / bestDecode,
      llama_prefill_tok_s: ownPrefill || null, llama_decode_tok_s: ownDecode || null,
      threads: o.threads, runs: o.runs,
    }) + '\n');
  } else if (o.chunk) {
    const rows = [];
    const ids = o.prompts[0];
    for (let c = 0; c < ids.length; c += o.chunk) {
      await seq.clearHistory();
      const res = await seq.controlledEvaluate(ids.slice(c, c + o.chunk).map((id) => [id, { generateNext: { logits: true } }]));
      for (let i = 0; i < o.chunk; ++i) rows.push(logitsArray(res[i].next.logits, res[i].next.logits.size));
    }
    process.stdout.write(JSON.stringify({ logits: rows, threads: o.threads, llama_cpp: llamaInfo(llama) }) + '\n');
  } else {
    for (const prompt of o.prompts) {
      await seq.clearHistory();
      process.stdout.write(JSON.stringify(await generate(seq, prompt, o, gen, llama)) + '\n');
    }
  }
  await context.dispose();
  await model.dispose();
  await llama.dispose();
}

// One prompt's greedy run from an empty sequence: {tokens, threads, llama_cpp[, logits]}.
async function generate(seq, prompt, o, gen, llama) {
  const rows = [];
  const tokens = [];
  // The prompt: logits after every position when asked, else only after the last.
  const items = prompt.map((id, i) =>
    i === prompt.length - 1 ? [id, gen(o.logits)] : o.logits ? [id, { generateNext: { logits: true } }] : id);
  let res = await seq.controlledEvaluate(items);
  const collect = (r, i) => {
    if (o.logits) rows.push(logitsArray(r[i].next.logits, r[i].next.logits.size));
  };
  if (o.logits) for (let i = 0; i < prompt.length; ++i) collect(res, i);
  let next = res[prompt.length - 1].next.token;
  for (let k = 0; k < o.n; ++k) {
    if (next === undefined || next === null) throw new Error(`llama.cpp gave no token at step ${k}`);
    tokens.push(next);
    if (o.logits && argmax(rows[rows.length - 1]) !== next)
      throw new Error(`step ${k}: llama.cpp's greedy token ${next} is not the argmax ${argmax(rows[rows.length - 1])} of its logits`);
    if (k === o.n - 1) break;
    res = await seq.controlledEvaluate([[next, gen(o.logits)]]);
    collect(res, 0);
    next = res[0].next.token;
  }
  const out = { tokens, threads: o.threads, llama_cpp: llamaInfo(llama) };
  if (o.logits) out.logits = rows;
  return out;
}

function llamaInfo(llama) {
  return { build: llama.buildType, gpu: llama.gpu, release: llama.llamaCppRelease, system: llama.systemInfo };
}

main().catch((e) => {
  process.stderr.write(`llamacpp_run: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
