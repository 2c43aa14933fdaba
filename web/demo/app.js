// The demo page: picks a model (the server's, the browser cache's, a URL, files or drag-and-drop),
// loads it into the krafla worker with a progress bar and a Cache Storage copy, remembers it and
// the settings across reloads (restoring the model from the cache), then chats (talk.js) when
// the model has a chat template, or continues a text when it has none.
// Query parameters: ?threads=0 forbids the threaded builds, ?build=NAME forces one.
import { Krafla } from '../src/index.js';
import { SETTING_IDS } from './fields.js';
import { Talk } from './talk.js';

const $ = (id) => document.getElementById(id);
const CACHE = 'krafla-models';
const SAVED = 'krafla-demo';          // localStorage: {model, loaded: [models], settings, system}
const REMOTE = { name: 'stories15M (58 MiB from huggingface.co)', url: 'https://huggingface.co/karpathy/tinyllamas/resolve/main/stories15M.bin',
  tokenizer: 'https://raw.githubusercontent.com/karpathy/llama2.c/master/tokenizer.bin' };
const params = new URLSearchParams(location.search);
// State the tests read (Playwright): the progress fractions seen, the build, the last stats, ...
const demo = (window.kraflaDemo = { progress: [], build: null, stats: null, usage: null, loaded: false, generating: false, mode: null });

let engine = null;
const saved = (() => { try { return JSON.parse(localStorage.getItem(SAVED)) ?? {}; } catch { return {}; } })();
const save = () => localStorage.setItem(SAVED, JSON.stringify(saved));
const abs = (u) => new URL(u, location.href).href;

export function showError(e) {
  const box = $('error');
  box.textContent = e ? (e.message ?? String(e)) : '';
  box.hidden = !e;
  if (e) console.error(e);
}

function setStatus(text) { $('status').textContent = text; }
const mib = (n) => `${(n / 1048576).toFixed(1)} MiB`;
const PHASES = { download: 'Downloading', cache: 'Reading from the browser cache', read: 'Reading the file', tokenizer: 'Downloading the tokenizer', convert: 'Converting the model', load: 'Loading into wasm memory' };

function onProgress(p) {
  // Download and read phases fill the first 90%, conversion and loading the rest.
  const base = p.phase === 'convert' || p.phase === 'load' ? 0.9 : 0;
  const v = base + (base ? 0.1 : 0.9) * (p.fraction ?? 0);
  $('progress').value = v;
  demo.progress.push(Number(v.toFixed(4)));
  const amount = p.total > 1 ? ` ${mib(p.loaded)} of ${mib(p.total)}` : '';
  setStatus(`${PHASES[p.phase] ?? p.phase}${p.file ? ` ${p.file}` : ''}…${amount}`);
}

/**
 * The models whose bytes this browser's cache holds, from Krafla.cache.list() (the package caches
 * .mlb and GGUF files by URL, a llama2.c checkpoint converted under its `source` URL, a Hugging
 * Face folder file by file), named as when this page loaded them, with their size on disk.
 */
async function cachedModels() {
  const entries = await Krafla.cache.list(CACHE).catch(() => []);
  const known = new Map((saved.loaded ?? []).map((m) => [m.url, m]));
  const out = [];
  for (const e of entries) {
    const name = decodeURIComponent(new URL(e.url).pathname.split('/').pop());
    if (e.source) { // a llama2.c conversion: its key is SOURCE?krafla-mlb=q8&tokenizer=TOKENIZER_URL
      const tokenizer = new URL(e.url).searchParams.get('tokenizer') ?? undefined;
      const srcName = decodeURIComponent(new URL(e.source).pathname.split('/').pop());
      out.push({ ...known.get(e.source), url: e.source, name: known.get(e.source)?.name ?? srcName, tokenizer, size: e.size });
    } else if (name === 'config.json') {
      const folder = e.url.slice(0, -'config.json'.length);
      const size = entries.filter((f) => f.url.startsWith(folder)).reduce((a, f) => a + f.size, 0);
      out.push({ ...(known.get(folder) ?? { url: folder, name: folder.split('/').at(-2) }), size });
    } else if (/\.(mlb|gguf)$/i.test(name)) {
      out.push({ ...known.get(e.url), url: e.url, name: known.get(e.url)?.name ?? name, size: e.size });
    }
  }
  return out;
}

async function serverModels() {
  try {
    const r = await fetch('/models/index.json');
    return r.ok ? (await r.json()).map((m) => ({ ...m, url: abs(m.url), tokenizer: m.tokenizer && abs(m.tokenizer) })) : [];
  } catch { return []; }
}

// The picker: the server's models, the cached ones, the remote default, and "another URL".
async function fillPicker(select) {
  const [local, cached] = await Promise.all([serverModels(), cachedModels()]);
  const pick = $('model-pick');
  pick.textContent = '';
  const group = (label, models, note = '') => {
    if (!models.length) return;
    const g = document.createElement('optgroup');
    g.label = label;
    for (const m of models) g.append(new Option(`${m.name}${note}`, JSON.stringify({ url: m.url, tokenizer: m.tokenizer, name: m.name })));
    pick.append(g);
  };
  group("In this browser's cache (works offline)", cached);
  group('On this server', local);
  group('On the internet', [REMOTE]);
  pick.append(new Option('Another URL…', 'other'));
  const want = select ?? local.find((m) => /stories260K/.test(m.name)) ?? local[0] ?? REMOTE;
  const match = [...pick.options].find((o) => o.value !== 'other' && JSON.parse(o.value).url === abs(want.url));
  pick.value = match ? match.value : 'other';
  if (!match && want) { $('model-url').value = want.url; $('tokenizer-url').value = want.tokenizer ?? ''; }
  $('other').hidden = pick.value !== 'other';
  return cached;
}

function describeBuild(b) {
  const simd = { relaxed: 'relaxed SIMD', simd128: 'SIMD (simd128)', scalar: 'no SIMD' }[b.isa] ?? b.isa;
  return `Engine: ${b.name}, WebAssembly with ${simd}, ${b.nThreads} thread${b.nThreads > 1 ? 's' : ''}. Why this one: ${b.reason}.`;
}

const talk = new Talk({ demo, showError, getEngine: () => engine });

async function load(source, tokenizer, label, remember) {
  if (!engine) return;
  showError(null);
  talk.stop();
  talk.setMode(null);
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
      `${info.nLayers} layers, vocabulary ${info.vocabSize}, context ${info.ctx} tokens, ${info.wtype} weights.`);
    demo.loaded = true;
    demo.fromCache = info.fromCache;
    demo.label = label;
    if (remember) {
      saved.model = remember;
      saved.loaded = [remember, ...(saved.loaded ?? []).filter((m) => m.url !== remember.url)].slice(0, 20);
      save();
      await fillPicker(remember);
    }
    talk.setMode(info, label);
  } catch (e) {
    $('progress').value = 0;
    // A load that fails before the engine opens the new model keeps the one loaded before.
    demo.loaded = !!engine.model;
    setStatus(demo.loaded ? `The model loaded before, ${demo.label}, is still loaded.` : 'No model loaded.');
    if (demo.loaded) talk.setMode(engine.model, demo.label);
    if (/the download failed \(/.test(e?.message ?? '')) {
      const cached = (await cachedModels()).map((m) => m.name);
      e.message += `\nThe server cannot be reached${navigator.onLine ? '' : ': this browser is offline'}. ` +
        (cached.length ? `Models in this browser's cache load without a network: ${cached.join(', ')}.` : 'No model is in this browser\'s cache yet.');
    }
    showError(e);
  } finally {
    $('load-url').disabled = false;
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
  load(list[0], list[1], list[0].name);
}

function loadPicked() {
  let m;
  if ($('model-pick').value === 'other') {
    const url = $('model-url').value.trim();
    const tok = $('tokenizer-url').value.trim();
    if (!url) { showError(new Error('Enter a model URL.')); return; }
    m = { url: abs(url), tokenizer: tok ? abs(tok) : undefined, name: decodeURIComponent(new URL(abs(url)).pathname.replace(/\/$/, '').split('/').pop()) };
  } else {
    m = JSON.parse($('model-pick').value);
  }
  if (m.url.endsWith('/')) load({ hf: m.url }, undefined, m.name, m);
  else load(m.url, m.tokenizer, m.name, m);
}

async function start() {
  // The settings of the last visit.
  for (const id of [...SETTING_IDS, 'system', 'prompt']) {
    if (saved.settings?.[id] !== undefined) $(id).value = saved.settings[id];
    $(id).addEventListener('input', () => { saved.settings = { ...saved.settings, [id]: $(id).value }; save(); });
  }
  const cached = await fillPicker(saved.model);
  try {
    engine = await Krafla.create({ threads: params.get('threads') === '0' ? false : undefined, build: params.get('build') ?? undefined });
  } catch (e) {
    $('build').textContent = 'Engine: none';
    showError(e);
    return;
  }
  demo.build = engine.build;
  demo.engine = engine;
  $('build').textContent = describeBuild(engine.build);
  $('build').dataset.build = engine.build.name;
  // The model of the last visit comes back when its bytes are in the cache (no network needed).
  if (saved.model && cached.some((m) => m.url === saved.model.url)) loadPicked();
  else if (saved.model) setStatus(`No model loaded. The last one, ${saved.model.name}, is not in the browser cache: press Load to download it again.`);
}

$('model-pick').onchange = () => { $('other').hidden = $('model-pick').value !== 'other'; };
$('load-url').onclick = loadPicked;
$('file').onchange = (e) => loadFiles(e.target.files);
$('folder').onchange = (e) => loadFiles(e.target.files);
$('clear-cache').onclick = async () => {
  await Krafla.cache.clear(CACHE).catch(() => {}); // Cache Storage and the OPFS files of large models
  await fillPicker(saved.model);
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
