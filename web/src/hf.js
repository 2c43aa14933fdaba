// Hugging Face model folders. A browser has no folders, so `load({hf})` takes the folder as a URL
// (a folder URL such as https://huggingface.co/ORG/NAME/resolve/main/, or a repo id ORG/NAME on
// huggingface.co), as the files picked with <input webkitdirectory>, or as an object from file
// name to source. The files the engine reads (src/convert/hf_import.cpp) are fetched one by one,
// small ones first, staged in the module's in-memory file system (MEMFS, a temporary folder) and
// opened there with krafla_open_path, which converts the folder as `ml_run FOLDER` does on disk.
//
// Memory (W = the safetensors bytes, Q = the converted model, about W/2 for bf16 weights at Q8):
// each staged file is the downloaded array itself (MEMFS owns it, no copy); the engine reads each
// weight file into the wasm heap once, whole, and at its close the staged copy is dropped, so
// that W is held once while the engine converts: the peak is W + Q + one tensor in float32 (not
// 2W + Q). The read weights are freed when the conversion ends, before the model is laid out
// (Q, plus a packed copy where the build packs). The staging folder is removed after the open.
import { KraflaError } from './errors.js';
import { cacheDelete, cachePut, cachePutAbsent } from './cache.js';
import { isBadBytes, readSource } from './source.js';

const HF_HOST = 'https://huggingface.co';
const WEIGHTS = 'model.safetensors';
const INDEX = 'model.safetensors.index.json';
const MAX_SHARDS = 4096; // as the engine's importer
/** The files besides the weights, [name, required], small ones first: a folder without its tokenizer fails before its weights download. */
const SMALL_FILES = [['config.json', true], ['generation_config.json', false], ['tokenizer.json', true], ['tokenizer_config.json', false]];
const NEEDS = 'a Hugging Face model folder needs config.json, tokenizer.json and model.safetensors ' +
  '(or model.safetensors.index.json and its shards)';
/** "ORG/NAME": a model on huggingface.co. A folder on the page's site is written "/models/x/" or "./models/x/". */
const REPO_ID = /^[A-Za-z0-9][\w.-]*\/[\w.-]+$/;
const HAS_SCHEME = /^[a-z][a-z0-9+.-]*:/i;

let staged = 0; // staging folders made by this module instance

export const isHfSource = (src) => src !== null && typeof src === 'object' && !ArrayBuffer.isView(src) &&
  !(src instanceof ArrayBuffer) && !(typeof Blob === 'function' && src instanceof Blob) && 'hf' in src;

const isBlob = (x) => typeof Blob === 'function' && x instanceof Blob;

/**
 * {hf, revision} as the worker receives it (structured-clone safe: node's clone of a File keeps
 * no name): {hf: URL string} for a folder URL or repo id (a relative URL resolved against `base`,
 * the page), or {hf: {name: source}, label} for picked files (the shallowest file of each name
 * wins; label: their top folder) and objects of files.
 */
export function normalizeHf({ hf, revision = 'main' }, base) {
  if (hf instanceof URL) hf = hf.href;
  if (typeof hf === 'string') {
    if (REPO_ID.test(hf)) return { hf: `${HF_HOST}/${hf}/resolve/${encodeURIComponent(revision)}/` };
    return { hf: base && !HAS_SCHEME.test(hf) ? new URL(hf, base).href : hf };
  }
  if (hf !== null && typeof hf === 'object' && typeof hf.length === 'number') { // a FileList or an array of Files
    const byName = new Map();
    let label = null;
    for (const f of Array.from(hf)) {
      if (!isBlob(f)) throw new KraflaError('krafla: load({hf: files}): every entry must be a File', 'arg');
      const parts = (f.webkitRelativePath || f.name || '').split('/');
      const name = parts[parts.length - 1];
      if (parts.length > 1) label ??= parts[0];
      const prev = byName.get(name);
      if (!prev || parts.length < prev.depth) byName.set(name, { file: f, depth: parts.length });
    }
    return { hf: Object.fromEntries([...byName].map(([name, e]) => [name, e.file])), label: label ?? 'the files given' };
  }
  if (hf !== null && typeof hf === 'object') {
    return { hf: Object.fromEntries(Object.entries(hf).map(([k, v]) => [k, v instanceof URL ? v.href : v])), label: 'the files given' };
  }
  throw new KraflaError('krafla: load({hf}): hf is a folder URL, a repo id ("ORG/NAME"), the picked Files or an object from file name to source', 'arg');
}

// Where each file of the folder comes from: source(name) (undefined: not given), where(name) to
// name it in messages, and the folder's label.
function folderOf({ hf, label }) {
  if (typeof hf === 'string') {
    if (!HAS_SCHEME.test(hf)) { // a path (node)
      const root = hf.endsWith('/') ? hf : `${hf}/`;
      return { label: root.slice(0, -1), remote: true, source: (name) => root + name, where: (name) => root + name };
    }
    const u = new URL(hf);
    u.search = '';
    u.hash = '';
    if (!u.pathname.endsWith('/')) u.pathname += '/';
    const at = (name) => new URL(name, u).href;
    return { label: u.href.slice(0, -1), remote: true, source: at, where: at };
  }
  return { label, remote: false, source: (name) => (Object.hasOwn(hf, name) ? hf[name] : undefined), where: (name) => `${label}/${name}` };
}

const plainName = (s) => typeof s === 'string' && s.length > 0 && s.length <= 255 && s !== '.' && s !== '..' &&
  !s.includes('/') && !s.includes('\\') && !s.includes('\0');

// The shard names of model.safetensors.index.json (checked again by the engine, but here first:
// they become URLs, so a name must stay inside the folder).
function shardNames(bytes, where) {
  let index;
  try {
    index = JSON.parse(new TextDecoder().decode(bytes));
  } catch (e) {
    throw new KraflaError(`${where}: not valid JSON (${e.message})`, 'format');
  }
  const map = index?.weight_map;
  if (map === null || typeof map !== 'object' || Array.isArray(map)) throw new KraflaError(`${where}: weight_map is missing or not an object`, 'format');
  const names = [...new Set(Object.values(map))];
  if (!names.length) throw new KraflaError(`${where}: weight_map is empty`, 'format');
  for (const n of names) {
    if (!plainName(n)) throw new KraflaError(`${where}: weight_map names ${JSON.stringify(n)}, which is not the name of a file in the folder`, 'format');
  }
  if (names.length > MAX_SHARDS) throw new KraflaError(`${where}: ${names.length} shards, more than ${MAX_SHARDS}`, 'format');
  return names.sort();
}

// After the engine has read a staged file whole (it reads each weight file once and closes it),
// its bytes are dropped: the weights are then held once (read) and not twice (staged and read).
function dropWhenRead(FS, path) {
  const node = FS.lookupPath(path).node;
  const ops = node.stream_ops;
  node.stream_ops = {
    ...ops,
    close(stream) {
      ops.close?.(stream);
      if (stream.position >= node.usedBytes) {
        node.contents = new Uint8Array(0);
        node.usedBytes = 0;
      }
    },
  };
}

function removeStaged(FS, dir) {
  try {
    for (const f of FS.readdir(dir)) if (f !== '.' && f !== '..') FS.unlink(`${dir}/${f}`);
    FS.rmdir(dir);
  } catch { /* not made */ }
}

/**
 * Loads the folder into host (host.js): downloads (or reads) its files, stages them, opens them
 * with the engine. With `cache`, each URL's file is stored in the cache (cache.js) as it arrives (so its
 * bytes need not be kept until the engine has opened the folder) and deleted again when the load
 * fails; a cached file that the engine refuses to open (io, format, shape) is deleted with the
 * folder's other cached files, so that the next load downloads them again. The optional files
 * that answered 404 are recorded as absent once the folder has opened, so that it loads offline.
 */
export async function loadHf(host, id, { source, tokenizer, ctx = 0, cache = false }) {
  if (tokenizer) throw new KraflaError('krafla: a Hugging Face folder has its own tokenizer.json: drop the tokenizer option', 'arg');
  const progress = (event) => host.post({ type: 'event', id, event: { type: 'progress', ...event } });
  const folder = folderOf(source);
  const { FS } = host.mod;
  const dir = `/krafla-hf-${++staged}`;
  const written = []; // cache keys stored by this load
  const fromCacheKeys = [];
  const absent = []; // optional files' URLs that answered 404: recorded in the cache once the load succeeds (offline loads)
  let files = 0;
  let engineRefused = false;

  // Fetches name into the staging folder; false when an optional file is absent.
  const stage = async (name, required, { drop = false, keep = false } = {}) => {
    const src = folder.source(name);
    if (src === undefined) {
      if (!required) return false;
      throw new KraflaError(`${folder.label}: ${name} is missing (${NEEDS})`, 'format');
    }
    const url = typeof src === 'string' ? src : null;
    const got = await readSource(src, {
      cache: url ? cache : false, missingOk: !required, progress: (e) => progress({ ...e, file: name }), phase: 'download',
    });
    if (!got) {
      if (url && cache) absent.push(url);
      return false;
    }
    ++files;
    if (url && got.fromCache) fromCacheKeys.push(url);
    else if (url && cache) {
      await cachePut(cache, url, got.bytes);
      written.push(url);
    }
    const path = `${dir}/${name}`;
    FS.writeFile(path, got.bytes, { canOwn: true }); // MEMFS keeps this array: no copy
    if (drop) dropWhenRead(FS, path);
    return keep ? got.bytes : true;
  };

  try {
    FS.mkdir(dir);
    for (const [name, required] of SMALL_FILES) await stage(name, required);
    if (!(await stage(WEIGHTS, false, { drop: true }))) {
      const index = await stage(INDEX, false, { keep: true });
      if (!index) {
        throw new KraflaError(folder.remote ? `${folder.label}: neither ${WEIGHTS} nor ${INDEX} was found (HTTP 404 for both; ${NEEDS})`
          : `${folder.label}: neither ${WEIGHTS} nor ${INDEX} is among the files (${NEEDS})`, folder.remote ? 'io' : 'format');
      }
      for (const shard of shardNames(index, folder.where(INDEX))) {
        if (shard === INDEX || SMALL_FILES.some(([n]) => n === shard)) throw new KraflaError(`${folder.where(INDEX)}: weight_map names ${shard} as a shard`, 'format');
        await stage(shard, true, { drop: true });
      }
    }
    // The model loaded before stays until here: a failed download keeps it.
    host.unload();
    progress({ phase: 'convert', loaded: 0, total: 1 });
    const m = host.mod;
    const s = m.ccall('krafla_open_path', 'number', ['string', 'number', 'number', 'number', 'number'], [dir, ctx, 0, host.threads, 0]);
    if (!s) {
      engineRefused = true;
      // The engine names the staged paths; the user knows the folder.
      throw host.fail('', (msg) => {
        const named = msg.split(dir).join(folder.label);
        return named.startsWith(folder.label) ? named : `${folder.label}: ${named}`;
      });
    }
    host.session = s;
    for (const url of absent) await cachePutAbsent(cache, url);
    progress({ phase: 'convert', loaded: 1, total: 1 });
    progress({ phase: 'load', loaded: 1, total: 1 });
    return { ...host.info(), fromCache: files > 0 && fromCacheKeys.length === files, build: host.build.name };
  } catch (e) {
    for (const key of written) await cacheDelete(cache, key);
    if (engineRefused && isBadBytes(e) && fromCacheKeys.length) {
      for (const key of fromCacheKeys) await cacheDelete(cache, key);
      e.message += ' (the cached copies of its files were removed: the next load downloads them again)';
    }
    throw e;
  } finally {
    removeStaged(FS, dir);
  }
}
