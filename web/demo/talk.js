// The demo's conversation: with a model that has a chat template, a chat through
// k.chat.completions.create (streamed, with a system prompt, stop and new chat; each turn
// evaluates only its new tokens); without one, the text continued from a prompt (k.generate).
import { describeStats, readSettings } from './fields.js';

const $ = (id) => document.getElementById(id);

export class Talk {
  constructor({ demo, showError, getEngine }) {
    Object.assign(this, { demo, showError, getEngine, mode: null, messages: [], controller: null });
    $('generate').onclick = () => this.run();
    $('stop').onclick = () => this.stop();
    $('new-chat').onclick = () => this.newChat();
    $('message').addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey) { e.preventDefault(); if (!$('generate').disabled) this.run(); }
    });
  }

  /** 'chat' for a model with a chat template, 'complete' for one without, null while none is loaded. */
  setMode(info, label) {
    this.mode = info ? (info.hasChatTemplate ? 'chat' : 'complete') : null;
    this.demo.mode = this.mode;
    $('chat-box').hidden = this.mode !== 'chat';
    $('gen-box').hidden = this.mode === 'chat';
    $('generate').textContent = this.mode === 'chat' ? 'Send' : 'Generate';
    $('generate').disabled = !this.mode;
    const note = $('mode-note');
    note.hidden = this.mode !== 'complete';
    if (this.mode === 'complete') {
      note.textContent = `${label} has no chat template${info.hasTokenizer ? '' : ' (nor a tokenizer of its own)'}, so it cannot hold a ` +
        'conversation: it continues the text you write below. Models converted with a tokenizer folder that has a chat template ' +
        '(ml_convert … --tokenizer FOLDER) open a chat instead.';
    }
    if (this.mode === 'chat') this.newChat();
  }

  stop() { this.controller?.abort(); }

  newChat() {
    this.stop();
    this.messages = [];
    $('conversation').textContent = '';
    $('stats').textContent = '';
  }

  bubble(role, text) {
    const div = document.createElement('div');
    div.className = `msg ${role}`;
    div.textContent = text;
    $('conversation').append(div);
    return div;
  }

  async run() {
    const engine = this.getEngine();
    this.showError(null);
    const settings = readSettings(engine.model?.ctx ?? 4096);
    if (!settings || !this.mode) return;
    if (this.mode === 'chat' && !$('message').value.trim()) { this.showError(new Error('Write a message first.')); return; }
    this.controller = new AbortController();
    $('generate').disabled = true;
    $('stop').disabled = false;
    Object.assign(this.demo, { generating: true, stats: null, usage: null, tokens: 0 });
    $('stats').textContent = this.mode === 'chat' ? 'Thinking…' : 'Generating…';
    try {
      if (this.mode === 'chat') await this.chat(engine, settings);
      else await this.complete(engine, settings);
      this.demo.stats = engine.lastStats;
      $('stats').textContent = describeStats(engine.lastStats);
    } catch (e) {
      if (e?.kind === 'abort' && engine.lastStats) {
        this.demo.stats = engine.lastStats;
        $('stats').textContent = describeStats(engine.lastStats);
      } else {
        $('stats').textContent = '';
        this.showError(e);
      }
    } finally {
      this.demo.generating = false;
      $('generate').disabled = !this.mode;
      $('stop').disabled = true;
    }
  }

  async chat(engine, s) {
    const text = $('message').value.trim();
    $('message').value = '';
    this.messages.push({ role: 'user', content: text });
    const asked = this.bubble('user', text);
    const reply = this.bubble('assistant', '');
    reply.classList.add('streaming');
    const system = $('system').value.trim();
    const messages = [...(system ? [{ role: 'system', content: system }] : []), ...this.messages];
    let failed = true;
    try {
      const stream = await engine.chat.completions.create({
        messages, stream: true, stream_options: { include_usage: true },
        temperature: s.temperature, top_p: s.topP, max_tokens: s.maxTokens, seed: s.seed,
      }, { signal: this.controller.signal });
      for await (const chunk of stream) {
        if (chunk.usage) this.demo.usage = chunk.usage;
        const piece = chunk.choices[0]?.delta.content;
        if (piece) { reply.textContent += piece; this.demo.tokens += 1; }
        $('conversation').scrollTop = $('conversation').scrollHeight;
      }
      failed = false;
    } finally {
      // A stopped reply stays in the conversation as far as it got; a failed one is taken back.
      reply.classList.remove('streaming');
      if (!failed || this.controller.signal.aborted) this.messages.push({ role: 'assistant', content: reply.textContent });
      else { this.messages.pop(); reply.remove(); asked.remove(); $('message').value = text; }
    }
  }

  async complete(engine, s) {
    const out = $('output');
    out.textContent = '';
    const promptSpan = document.createElement('span');
    promptSpan.className = 'prompt';
    promptSpan.textContent = $('prompt').value;
    const gen = document.createElement('span');
    gen.className = 'gen';
    out.append(promptSpan, gen);
    const it = engine.generate($('prompt').value, { ...s, signal: this.controller.signal, onToken: (t) => { this.demo.tokens = t.n; } });
    for await (const piece of it) gen.textContent += piece;
  }
}
