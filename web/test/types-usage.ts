// Compiled (not run) by types.test.mjs: the API as the README shows it must type-check against
// src/index.d.ts, and misuse must not.
import { Krafla, KraflaError, chooseBuild, detectFeatures, parseHeader, type ChatMessage, type ChatTemplateOptions, type GenerateStats, type HfFolder,
  type ModelInfo, type Progress, type KraflaErrorKind, type ChatCompletion, type ChatCompletionChunk, type ChatCompletionMessageParam, type Completion,
  type KraflaApiError } from '../src/index.js';

declare const picker: HTMLInputElement; // <input type="file" webkitdirectory>

export async function usage(out: { textContent: string }): Promise<GenerateStats | null> {
  const k = await Krafla.create({ threads: false });
  const name: string = k.build.name;
  const info = await k.load('https://example.org/stories15M.bin', {
    tokenizer: new URL('https://example.org/tokenizer.bin'),
    onProgress: (p: Progress) => { out.textContent = `${p.phase} ${p.fraction ?? 0}`; },
    cache: 'krafla-models',
  });
  const dim: number = info.dim;
  await k.load(new Blob([]));
  await k.load(new ArrayBuffer(8));
  // Hugging Face folders: by URL, by repo id, as picked files, as an object of files.
  const hf: ModelInfo = await k.load({ hf: 'https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct/resolve/main/' }, {
    cache: 'krafla-models', onProgress: (p: Progress) => { out.textContent = `${p.file ?? ''} ${p.phase}`; },
  });
  await k.load({ hf: 'HuggingFaceTB/SmolLM2-135M-Instruct', revision: 'main' });
  await k.load({ hf: new URL('https://example.org/models/smollm2/') });
  if (picker.files) await k.load({ hf: picker.files });
  const folder: HfFolder = { hf: [new File(['{}'], 'config.json')] };
  await k.load(folder);
  await k.load({ hf: { 'config.json': new URL('https://example.org/config.json'), 'model.safetensors': new Blob([]), 'tokenizer.json': new Uint8Array(2) } });
  const ctl = new AbortController();
  for await (const piece of k.generate('Once upon a time', { maxTokens: 200, temperature: 0.8, topP: 0.9, seed: 42n, stop: ['.'], signal: ctl.signal })) {
    out.textContent += piece;
  }
  const ids: number[] = await k.tokenize('x', { addBos: true });
  const text: string = await k.detokenize(ids);
  // Hugging Face tokenizers and chat templates.
  const m: ModelInfo = await k.load('https://example.org/smollm2.mlb');
  const kind: 'hf' | 'llama2c' | 'none' = m.tokenizerKind;
  const chat: boolean = m.hasChatTemplate;
  const special: number[] = await k.tokenize('<|im_start|>user', { addSpecial: true });
  const clean: string = await k.detokenize(new Int32Array(special), { skipSpecial: true });
  const messages: ChatMessage[] = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: clean }, { role: 'tool', content: '{}', name: 'f' }];
  const opts: ChatTemplateOptions = { addGenerationPrompt: false, vars: { enable_thinking: false }, chatTemplate: null };
  const prompt: string = await k.applyChatTemplate(messages, chat ? { addGenerationPrompt: true } : opts);
  await k.applyChatTemplate([{ role: 'user', content: 'hi' }], { chatTemplate: '{{ messages[0].content }}', vars: null });
  await k.complete(prompt, { temperature: 0, addBos: false, tokens: await k.tokenize(prompt), stop: '<|im_end|>' });
  if (kind === 'none') return null;
  const { stats } = await k.complete(text, { temperature: 0 });
  const b = chooseBuild(['wasm_simd128', 'wasm_scalar'], detectFeatures());
  const h = parseHeader(new Uint8Array(256));
  const e = new KraflaError('x', 'io');
  const kindOf: KraflaErrorKind = e.kind;
  await k.unload();
  k.terminate();
  return dim + h.dim + hf.dim > 0 && b.threaded === false && kindOf !== 'format' && name !== '' ? stats : k.lastStats;
}

// The openai client's surface (README "OpenAI's API in the browser"): the same calls as against ml_server.
export async function openaiUsage(k: Krafla, out: { textContent: string }): Promise<number> {
  const client = k; // was: new OpenAI({ baseURL: 'http://127.0.0.1:8080/v1', apiKey: 'sk-local' })
  const r: ChatCompletion = await client.chat.completions.create({
    model: 'any', messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'What is a fjord?' }],
    max_tokens: 64, temperature: 0.7, top_p: 0.9, top_k: 40, seed: 42, stop: ['\n\n'],
  });
  const text: string = r.choices[0].message.content;
  const why: 'stop' | 'length' = r.choices[0].finish_reason;
  const cached: number = r.usage.prompt_tokens_details.cached_tokens;
  const ctl = new AbortController();
  const stream = await client.chat.completions.create({
    messages: [{ role: 'user', content: [{ type: 'text', text }] }, { role: 'assistant', content: null }, { role: 'developer', content: 'x' }],
    stream: true, stream_options: { include_usage: true }, chat_template_kwargs: { enable_thinking: false },
  }, { signal: ctl.signal });
  for await (const chunk of stream) {
    const c: ChatCompletionChunk = chunk;
    out.textContent += c.choices[0]?.delta.content ?? '';
    if (c.usage) out.textContent += String(c.usage.total_tokens);
  }
  stream.controller.abort();
  // The README's conversation: the reply's message goes back into the history.
  const messages: ChatCompletionMessageParam[] = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'What is a fjord?' }];
  messages.push(r.choices[0].message, { role: 'user', content: 'And a glacier?' });
  for await (const chunk of await client.chat.completions.create({ messages, stream: true }, { signal: ctl.signal })) {
    if (chunk.usage) out.textContent += String(chunk.usage.prompt_tokens_details.cached_tokens);
  }
  const c: Completion = await client.completions.create({ prompt: 'Once upon a time', max_tokens: 16, signal: ctl.signal });
  await client.completions.create({ prompt: [[1, 2, 3]], seed: 2n ** 63n });
  for await (const chunk of await client.completions.create({ prompt: [1, 2, 3], stream: true })) out.textContent += chunk.choices[0]?.text ?? '';
  try {
    await client.chat.completions.create({ messages: [], n: 2 });
  } catch (e) {
    if (e instanceof KraflaError && e.kind === 'arg') {
      const a = e as unknown as KraflaApiError;
      out.textContent = `${a.status} ${a.error.param ?? ''} ${a.code ?? ''} ${a.type}`;
    }
  }
  return cached + c.usage!.completion_tokens + (why === 'stop' ? 1 : 0) + (k.lastStats?.cachedTokens ?? 0);
}
