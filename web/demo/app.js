// The demo page: loads a model (URL, file or drag-and-drop) into the krafla worker, with a
// progress bar and a Cache Storage copy for the next visit, and streams generated text.
// Query parameters: ?threads=0 forbids the threaded builds, ?build=NAME forces one.
import { Krafla } from '../src/index.js';

const $ = (id) => document.getElementById(id);
const CACHE = 'krafla-models';
const params = new URLSearchParams(location.search);
// State the tests read (Playwright): the progress fractions seen, the build, the last stats.
const demo = (window.kraflaDemo = { progress: [], build: null, stats: null, loaded: false, generating: false });

let engine = null;
let controller = null;

function showError(e) {
  const box = $('error');
  box.textContent = e ? (e.message ?? String(e)) : '';
  box.hidden = !e;
  if (e) console.error(e);
}

function setStatus(text) { $('status').textContent = text; }

function mib(n) { return `${(n / 1048576).toFixed(1)} MiB`; }

const PHASES = { download: 'Downloading', cache: 'Reading from the browser cache', read: 'Reading the file', tokenizer: 'Downloading the tokenizer', convert: 'Converting the model', load: 'Loading into wasm memory' };

function onProgress(p) {
  // Download and read phases fill the first 90%, conversion and loading the rest.
  const base = p.phase === 'convert' || p.phase === 'load' ? 0.9 : 0;
  const span = base ? 0.1 : 0.9;
  const frac = p.fraction ?? 0;
  const v = base + span * frac;
  $('progress').value = v;
  demo.progress.push(Number(v.toFixed(4)));
  const amount = p.total > 1 ? ` ${mib(p.loaded)} of ${mib(p.total)}` : '';
  setStatus(`${PHASES[p.phase] ?? p.phase}${p.file ? ` ${p.file}` : ''}…${amount}`);
}

async function start() {
  const threads = params.get('threads') === '0' ? false : undefined;
  try {
    engine = await Krafla.create({ threads, build: params.get('build') ?? undefined });
  } catch (e) {
    $('build').textContent = 'Build: none';
    showError(e);
    return;
  }
  const b = engine.build;
  demo.build = b;
  $('build').textContent = `Build: ${b.name} — ${b.kernels} kernels, ${b.nThreads} thread${b.nThreads > 1 ? 's' : ''}` +
    `${b.packG ? `, packed G=${b.packG}` : ''}. Why: ${b.reason}.`;
  $('build').dataset.build = b.name;
}

async function load(source, tokenizer, label) {
  if (!engine) return;
  showError(null);
  controller?.abort();
  $('generate').disabled = true;
  $('load-url').disabled = true;
  $('progress').value = 0;
  demo.progress = [];
  demo.loaded = false;
  const t0 = performance.now();
  try {
    const url = typeof source === 'string' || typeof source?.hf === 'string'; // URLs are cached (a folder's file by file)
    const info = await engine.load(source, { tokenizer, onProgress, cache: url ? CACHE : false });
    $('progress').value = 1;
    const secs = ((performance.now() - t0) / 1000).toFixed(2);
    setStatus(`Loaded ${label}${info.fromCache ? ' from the browser cache' : ''} in ${secs} s: dim ${info.dim}, ` +
      `${info.nLayers} layers, vocab ${info.vocabSize}, context ${info.ctx}, ${info.wtype} weights, ${info.isa} kernels.`);
    demo.loaded = true;
    demo.fromCache = info.fromCache;
    $('generate').disabled = false;
  } catch (e) {
    $('progress').value = 0;
    // A load that fails before the engine opens the new model keeps the one loaded before.
    demo.loaded = !!engine.model;
    $('generate').disabled = !demo.loaded;
    setStatus(demo.loaded ? `The model loaded before is still loaded (dim ${engine.model.dim}).` : 'No model loaded.');
    showError(e);
  } finally {
    $('load-url').disabled = false;
  }
}

async function generate() {
  showError(null);
  const out = $('output');
  out.textContent = '';
  const promptSpan = document.createElement('span');
  promptSpan.className = 'prompt';
  promptSpan.textContent = $('prompt').value;
  const gen = document.createElement('span');
  gen.className = 'gen';
  out.append(promptSpan, gen);
  const seedText = $('seed').value.trim();
  const opts = {
    temperature: Number($('temperature').value),
    topP: Number($('top-p').value),
    maxTokens: Math.floor(Number($('max-tokens').value)),
    seed: seedText === '' ? undefined : BigInt(seedText),
  };
  controller = new AbortController();
  $('generate').disabled = true;
  $('stop').disabled = false;
  demo.generating = true;
  demo.stats = null;
  $('stats').textContent = 'Generating…';
  try {
    demo.tokens = 0;
    const it = engine.generate($('prompt').value, { ...opts, signal: controller.signal, onToken: (t) => { demo.tokens = t.n; } });
    for (;;) {
      const r = await it.next();
      if (r.done) { demo.stats = r.value; break; }
      gen.textContent += r.value;
    }
    const s = demo.stats;
    $('stats').textContent = `${s.generatedTokens} tokens at ${s.tokensPerSecond.toFixed(1)} tok/s · prompt ${s.promptTokens} ` +
      `tokens at ${s.promptTokensPerSecond.toFixed(1)} tok/s · build ${s.build} · seed ${s.seed} · ` +
      `${s.stopReason === 'abort' ? 'stopped' : `ended: ${s.stopReason}`}`;
  } catch (e) {
    $('stats').textContent = '';
    showError(e);
  } finally {
    demo.generating = false;
    $('generate').disabled = false;
    $('stop').disabled = true;
  }
}

// Two files: the larger is the checkpoint, the smaller its tokenizer. Files with a config.json:
// a Hugging Face folder (the folder picker gives them all).
function loadFiles(files) {
  const list = [...files].sort((a, b) => b.size - a.size);
  if (!list.length) return;
  const config = list.find((f) => f.name === 'config.json');
  if (config) {
    load({ hf: list }, undefined, (config.webkitRelativePath || '').split('/')[0] || 'the Hugging Face folder');
    return;
  }
  const tokUrl = $('tokenizer-url').value.trim();
  const tokenizer = list[1] ?? (tokUrl || undefined);
  load(list[0], tokenizer, list[0].name);
}

$('load-url').onclick = () => {
  const url = $('model-url').value.trim();
  const tok = $('tokenizer-url').value.trim();
  if (!url) { showError(new Error('Enter a model URL.')); return; }
  if (url.endsWith('/')) { load({ hf: new URL(url, location.href).href }, undefined, url); return; }
  load(new URL(url, location.href).href, tok ? new URL(tok, location.href).href : undefined, url.split('/').pop());
};
$('file').onchange = (e) => loadFiles(e.target.files);
$('folder').onchange = (e) => loadFiles(e.target.files);
$('generate').onclick = generate;
$('stop').onclick = () => controller?.abort();
$('clear-cache').onclick = async () => {
  await Krafla.cache.clear(CACHE).catch(() => {}); // Cache Storage and the OPFS files of large models
  setStatus('The model cache is empty.');
};
const drop = $('drop');
drop.addEventListener('dragover', (e) => { e.preventDefault(); drop.classList.add('over'); });
drop.addEventListener('dragleave', () => drop.classList.remove('over'));
drop.addEventListener('drop', (e) => {
  e.preventDefault();
  drop.classList.remove('over');
  loadFiles(e.dataTransfer.files);
});

start();
