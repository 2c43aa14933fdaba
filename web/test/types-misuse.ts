// Must NOT type-check (types.test.mjs expects an error on every line marked below).
import { Krafla, KraflaError } from '../src/index.js';

export async function misuse(k: Krafla) {
  await k.load(42); // error: not a model source
  k.generate('x', { maxTokens: '5' }); // error: maxTokens is a number
  const n: number = k.build.name; // error: name is a string
  await k.applyChatTemplate('hi', { addGenerationPrompt: true }); // error: messages are an array of {role, content}
  await k.tokenize('x', { addSpecial: 1 }); // error: addSpecial is a boolean
  await k.applyChatTemplate([{ role: 'user', content: 'x' }], { addGenerationPrompt: 'no' }); // error: addGenerationPrompt is a boolean
  await k.load({ hf: 42 }); // error: hf is a folder URL, a repo id, files or an object of files
  if (new KraflaError('x').kind === 'fromat') return; // error: kind is one of the listed kinds
  await k.chat.completions.create({ messages: [{ role: 'tool', content: 'x' }] }); // error: no tool messages (ml_server refuses them)
  const r: { choices: { message: unknown }[] } = await k.chat.completions.create({ messages: [], stream: true }); // error: a stream has chunks
  await k.completions.create({ prompt: 'x', temperature: '0' }); // error: temperature is a number
}
