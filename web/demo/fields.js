// The demo's sampling settings read and checked (a message beside each bad field, nothing run
// until they are right), and the speeds put in words.
const $ = (id) => document.getElementById(id);
const MAX_SEED = 2n ** 64n - 1n;

// Each field: its check, returning [value] or a message saying what is expected.
const RULES = {
  temperature: (t) => {
    if (t === '') return 'Enter a temperature: 0 always picks the likeliest word, higher values vary more (up to 2).';
    const v = Number(t);
    return Number.isFinite(v) && v >= 0 && v <= 2 ? [v] : `The temperature is a number from 0 to 2, not "${t}".`;
  },
  'top-p': (t) => {
    const v = Number(t);
    return t !== '' && Number.isFinite(v) && v > 0 && v <= 1 ? [v] : `Top-p is a number above 0 and at most 1 (1 keeps every word), not "${t}".`;
  },
  'max-tokens': (t, ctx) => {
    const v = Number(t);
    return t !== '' && Number.isInteger(v) && v >= 1 && v <= ctx ? [v] : `The reply length is a whole number of tokens from 1 to ${ctx} (the model's context), not "${t}".`;
  },
  seed: (t) => {
    if (t === '') return [undefined];
    if (/^\d+$/.test(t) && BigInt(t) <= MAX_SEED) return [BigInt(t)];
    return `The seed is a whole number from 0 to ${MAX_SEED}, or empty for a random one; not "${t}".`;
  },
};

/** The settings, or null after marking each bad field with its message. */
export function readSettings(ctx) {
  const out = {};
  let ok = true;
  for (const [id, rule] of Object.entries(RULES)) {
    const input = $(id);
    const r = rule(input.value.trim(), ctx);
    const msg = $(`${id}-msg`);
    if (Array.isArray(r)) {
      out[id] = r[0];
      input.removeAttribute('aria-invalid');
      msg.textContent = '';
    } else {
      ok = false;
      input.setAttribute('aria-invalid', 'true');
      msg.textContent = r;
    }
  }
  return ok ? { temperature: out.temperature, topP: out['top-p'], maxTokens: out['max-tokens'], seed: out.seed } : null;
}

export const SETTING_IDS = Object.keys(RULES);

// A speed over fewer tokens or a shorter time than this is noise (timer resolution, one cold step).
const MIN_TOKENS = 16;
const MIN_SECONDS = 0.02;

const num = (n) => Math.round(n).toLocaleString('en-US');
const dur = (s) => (s < 1 ? `${num(s * 1000)} ms` : `${s.toFixed(2)} s`);

/** How fast `tokens` went in `seconds`, in words: a speed, or why there is none. */
export function speed(tokens, seconds, what = '') {
  const counted = `${num(tokens)} ${what}token${tokens === 1 ? '' : 's'} in ${dur(seconds)}`;
  if (tokens < MIN_TOKENS || seconds < MIN_SECONDS) return `${counted} (too short to measure a speed)`;
  return `${counted}, ${num(tokens / seconds)} tokens per second`;
}

/** The statistics of one generation in words: reading the prompt, then writing the reply. */
export function describeStats(s) {
  const reused = s.cachedTokens ? `; ${num(s.cachedTokens)} earlier token${s.cachedTokens === 1 ? '' : 's'} reused from the conversation so far` : '';
  const end = { abort: 'stopped', eos: 'the model ended its reply', length: 'the length limit was reached', stop: 'a stop text was reached', context: "the model's context is full" }[s.stopReason] ?? s.stopReason;
  return `Read the prompt: ${speed(s.promptTokens, s.promptSeconds, s.cachedTokens ? 'new ' : '')}${reused}. ` +
    `Wrote the reply: ${speed(s.generatedTokens, s.decodeSeconds)}. Ended: ${end}. Seed ${s.seed}.`;
}
