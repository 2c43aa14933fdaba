// The demo as a chat and its checks, in Chromium: a model with a chat template opens a
// conversation (two turns, the second evaluating only its new tokens, counted against native
// ml_tok), one without says why and continues a text; the picker lists the server's models and a
// file dropped into a model folder; bad settings get a message beside the field and run nothing;
// offline, a model not cached fails with a hint and a cached one loads; a GGUF file from the list
// gives ml_run's greedy text; Stop ends a chat reply, which stays. Screenshots go to artifacts/demo-*.png.
import { expect, test } from '@playwright/test';
import { execFileSync } from 'node:child_process';
import { copyFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { dir as hfDir, tool } from '../test/hf-models.mjs';
import { artifactsDir, modelsDir, nativeGenerated, nativeMlb } from '../test/native.mjs';

const CHAT_MODEL = join(hfDir, 'smol-chat.mlb'); // random weights, SmolLM2's tokenizer and ChatML

async function open(page) {
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto('/demo/index.html');
  await expect(page.locator('#build')).toHaveAttribute('data-build', /wasm_/);
  return errors;
}

async function pick(page, label) {
  await page.selectOption('#model-pick', { label });
  await page.click('#load-url');
  await expect(page.locator('#status')).toContainText(`Loaded ${label.replace(/ \(.*/, '')}`, { timeout: 30_000 });
}

const shot = (page, name) => page.screenshot({ path: join(artifactsDir, `demo-${name}.png`), fullPage: true });
const idle = (page) => page.waitForFunction(() => !window.kraflaDemo.generating && (window.kraflaDemo.stats || document.querySelector('#error:not([hidden])')));

// Native ml_tok: the chat template over the messages, then its token count (no special tokens added).
function nativePromptTokens(messages) {
  const m = join(artifactsDir, 'demo-messages.json');
  writeFileSync(m, JSON.stringify(messages));
  const text = execFileSync(tool('ml_tok'), [CHAT_MODEL, 'chat', m]);
  return execFileSync(tool('ml_tok'), [CHAT_MODEL, 'encode'], { input: text }).toString().trim().split(/\s+/).length;
}

async function send(page, text) {
  await page.fill('#message', text);
  await page.press('#message', 'Enter');
  await page.waitForFunction(() => window.kraflaDemo.generating === false && window.kraflaDemo.usage, null, { timeout: 30_000 });
  return page.evaluate(() => ({ usage: window.kraflaDemo.usage, stats: window.kraflaDemo.stats }));
}

test('a model with a chat template chats: two turns, the second evaluates only its new tokens', async ({ page }) => {
  const errors = await open(page);
  await pick(page, 'smol-chat.mlb');
  await expect(page.locator('#chat-box')).toBeVisible();
  await expect(page.locator('#gen-box')).toBeHidden();
  await expect(page.locator('#generate')).toHaveText('Send');
  await page.fill('#temperature', '0');
  await page.fill('#max-tokens', '24');
  await page.click('#system-box summary');
  await page.fill('#system', 'Be brief.');
  const one = await send(page, 'Hello, who are you?');
  const reply1 = await page.locator('.msg.assistant').nth(0).textContent();
  const turn1 = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hello, who are you?' }];
  expect(one.usage.prompt_tokens).toBe(nativePromptTokens(turn1));
  expect(one.usage.prompt_tokens_details.cached_tokens).toBe(0);
  expect(one.stats.promptTokens).toBe(one.usage.prompt_tokens);
  expect(reply1.length).toBeGreaterThan(0);

  const two = await send(page, 'And what can you do?');
  const turn2 = [...turn1, { role: 'assistant', content: reply1 }, { role: 'user', content: 'And what can you do?' }];
  const total = nativePromptTokens(turn2);
  expect(two.usage.prompt_tokens).toBe(total);
  const cached = two.usage.prompt_tokens_details.cached_tokens;
  // The whole first prompt (and the reply) is reused: only the rest is evaluated, and the page says so.
  expect(cached).toBeGreaterThanOrEqual(one.usage.prompt_tokens);
  expect(two.stats.promptTokens).toBe(total - cached);
  expect(two.stats.promptTokens).toBeLessThanOrEqual(total - one.usage.prompt_tokens);
  await expect(page.locator('#stats')).toContainText(`Read the prompt: ${two.stats.promptTokens} new tokens in`);
  await expect(page.locator('#stats')).toContainText(`; ${cached} earlier tokens reused from the conversation so far.`);
  await expect(page.locator('.msg.user')).toHaveText(['Hello, who are you?', 'And what can you do?']);
  await expect(page.locator('.msg.assistant')).toHaveCount(2);
  await shot(page, 'chat');

  // New chat: an empty conversation; the next turn is a first turn again.
  await page.click('#new-chat');
  await expect(page.locator('.msg')).toHaveCount(0);
  const again = await send(page, 'Hello, who are you?');
  expect(again.usage.prompt_tokens).toBe(one.usage.prompt_tokens);
  expect(await page.locator('.msg.assistant').textContent()).toBe(reply1);
  expect(errors).toEqual([]);
});

test('a model without a chat template continues a text and says why; the picker lists the server\'s models', async ({ page }) => {
  const dropped = join(artifactsDir, 'dropped-in.mlb');
  rmSync(dropped, { force: true });
  const errors = await open(page);
  const labels = await page.locator('#model-pick optgroup[label="On this server"] option').allTextContents();
  for (const m of ['stories260K.bin', 'stories260K.gguf', 'stories260K.mlb', 'tinystories-656k-hf', 'smol-chat.mlb']) expect(labels).toContain(m);
  // The engine in plain words: no "packed G=4".
  await expect(page.locator('#build')).toHaveText(/^Engine: wasm_\w+, WebAssembly with [\w ()]+, \d+ threads?\. Why this one: /);
  await expect(page.locator('#build')).not.toContainText('G=');
  await pick(page, 'stories260K.mlb');
  await expect(page.locator('#chat-box')).toBeHidden();
  await expect(page.locator('#mode-note')).toContainText('stories260K.mlb has no chat template, so it cannot hold a conversation');
  await expect(page.locator('#generate')).toHaveText('Generate');
  // A file dropped into a model folder shows up at the next reload.
  copyFileSync(nativeMlb(), dropped);
  await page.reload();
  await expect(page.locator('#model-pick optgroup[label="On this server"] option', { hasText: 'dropped-in.mlb' })).toHaveCount(1);
  rmSync(dropped);
  expect(errors).toEqual([]);
});

test('bad settings: a message beside the field, nothing runs, no uncaught error', async ({ page }) => {
  const errors = await open(page);
  await pick(page, 'stories260K.mlb');
  const bad = { seed: ['abc', 'The seed is a whole number from 0 to 18446744073709551615'], temperature: ['', 'Enter a temperature'],
    'top-p': ['0', 'Top-p is a number above 0'], 'max-tokens': ['1.5', 'The reply length is a whole number of tokens from 1 to'] };
  for (const [id, [value, message]] of Object.entries(bad)) {
    await page.fill(`#${id}`, value);
    await page.click('#generate');
    await expect(page.locator(`#${id}-msg`)).toContainText(message);
    await expect(page.locator(`#${id}`)).toHaveAttribute('aria-invalid', 'true');
  }
  await page.fill('#seed', '-5');
  await page.click('#generate');
  await expect(page.locator('#seed-msg')).toContainText('not "-5"');
  await shot(page, 'bad-settings');
  expect(await page.evaluate(() => window.kraflaDemo.stats)).toBeNull();
  await expect(page.locator('#output')).toHaveText('');
  // Put right: the messages go, and the largest seed is taken as it is (not wrapped).
  for (const [id, v] of [['seed', '18446744073709551615'], ['temperature', '0.5'], ['top-p', '0.9'], ['max-tokens', '20']]) await page.fill(`#${id}`, v);
  await page.click('#generate');
  await idle(page);
  for (const id of Object.keys(bad)) await expect(page.locator(`#${id}-msg`)).toBeHidden();
  expect((await page.evaluate(() => window.kraflaDemo.stats)).seed).toBe('18446744073709551615');
  await expect(page.locator('#stats')).toContainText('Seed 18446744073709551615.');
  expect(errors).toEqual([]);
});

test('offline: a model not cached fails with a hint, a cached one loads from the cache', async ({ page, context }) => {
  const errors = await open(page);
  await pick(page, 'stories260K.mlb');
  await context.setOffline(true);
  await page.selectOption('#model-pick', { label: 'stories15M (58 MiB from huggingface.co)' });
  await page.click('#load-url');
  await expect(page.locator('#error')).toContainText('the download failed', { timeout: 30_000 });
  await expect(page.locator('#error')).toContainText("this browser is offline. Models in this browser's cache load without a network: stories260K.mlb.");
  await shot(page, 'offline');
  await page.selectOption('#model-pick', { label: 'stories260K.mlb' });
  await page.click('#load-url');
  await expect(page.locator('#status')).toContainText('Loaded stories260K.mlb from the browser cache', { timeout: 30_000 });
  await page.fill('#temperature', '0');
  await page.fill('#max-tokens', '20');
  await page.click('#generate');
  await idle(page);
  expect((await page.evaluate(() => window.kraflaDemo.stats)).generatedTokens).toBe(20);
  await context.setOffline(false);
  expect(errors).toEqual([]);
});

test('a chat model comes back after a reload, with its settings and system prompt', async ({ page }) => {
  await open(page);
  await pick(page, 'smol-eog5.mlb');
  await page.fill('#temperature', '0.3');
  await page.click('#system-box summary');
  await page.fill('#system', 'Answer in French.');
  await page.reload();
  await expect(page.locator('#status')).toContainText('Loaded smol-eog5.mlb from the browser cache', { timeout: 30_000 });
  await expect(page.locator('#chat-box')).toBeVisible();
  await expect(page.locator('#temperature')).toHaveValue('0.3');
  await expect(page.locator('#system')).toHaveValue('Answer in French.');
});

test('a GGUF file from the list gives ml_run\'s greedy text', async ({ page }) => {
  const errors = await open(page);
  await pick(page, 'stories260K.gguf');
  const native = nativeGenerated(join(modelsDir, 'stories260K-gguf', 'stories260K.gguf'), 'Once upon a time', 40);
  await page.fill('#prompt', 'Once upon a time');
  await page.fill('#temperature', '0');
  await page.fill('#max-tokens', '40');
  await page.click('#generate');
  await idle(page);
  expect((await page.evaluate(() => window.kraflaDemo.stats)).generatedTokens).toBe(native.generated);
  expect(await page.locator('#output .gen').textContent()).toBe(native.text);
  expect(errors).toEqual([]);
});

test('Stop ends a chat reply, which stays in the conversation; the next turn goes on from it', async ({ page }) => {
  const errors = await open(page);
  await pick(page, 'slow-chat.mlb');
  await page.fill('#temperature', '0');
  await page.fill('#max-tokens', '900');
  await page.fill('#message', 'Tell me a long story.');
  await page.press('#message', 'Enter');
  await expect(page.locator('.msg.assistant')).not.toHaveText('', { timeout: 10_000 });
  await expect(page.locator('.msg.assistant.streaming')).toHaveCount(1);
  await page.click('#stop');
  await page.waitForFunction(() => window.kraflaDemo.generating === false, null, { timeout: 10_000 });
  const s = await page.evaluate(() => window.kraflaDemo.stats);
  expect(s.stopReason).toBe('abort');
  expect(s.generatedTokens).toBeLessThan(900);
  await expect(page.locator('#stats')).toContainText('Ended: stopped');
  await expect(page.locator('#error')).toBeHidden();
  const partial = await page.locator('.msg.assistant').textContent();
  expect(partial.length).toBeGreaterThan(0);
  await expect(page.locator('.msg.assistant.streaming')).toHaveCount(0);
  await page.fill('#max-tokens', '5');
  const next = await send(page, 'Go on.');
  // The second prompt holds the stopped reply: its tokens are all counted, most of them reused.
  const turn2 = [{ role: 'user', content: 'Tell me a long story.' }, { role: 'assistant', content: partial }, { role: 'user', content: 'Go on.' }];
  const m = join(artifactsDir, 'demo-messages.json');
  writeFileSync(m, JSON.stringify(turn2));
  const model = join(hfDir, 'slow-chat.mlb');
  const text = execFileSync(tool('ml_tok'), [model, 'chat', m]);
  expect(next.usage.prompt_tokens).toBe(execFileSync(tool('ml_tok'), [model, 'encode'], { input: text }).toString().trim().split(/\s+/).length);
  expect(next.usage.prompt_tokens_details.cached_tokens).toBeGreaterThan(0);
  await expect(page.locator('.msg.assistant')).toHaveCount(2);
  expect(errors).toEqual([]);
});
