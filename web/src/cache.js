// The model cache (Krafla.cache, and the worker's loads with `cache`): one entry per URL in Cache
// Storage, the index. A file of OPFS_MIN_BYTES or more goes to the origin private file system
// (OPFS: krafla-cache/<cache name>/<hash of the URL>) where the browser has one, and its Cache
// Storage entry is an empty marker with its size; smaller files (tokenizers, configs, small
// models) are the entry's body. Nothing is stored before the engine has opened it (host.js, hf.js),
// an OPFS file is complete or absent (createWritable commits on close), and a read checks the
// size. Without Cache Storage (node 20) nothing is cached: list() is empty, has() false.
import { KraflaError } from './errors.js';

/** The cache `load(url, {cache: true})` and Krafla.cache use when no name is given. */
export const DEFAULT_CACHE = 'krafla-models';
/** Files this large or larger are kept in OPFS (where there is one). */
export const OPFS_MIN_BYTES = 32 * 2 ** 20;

const OPFS_DIR = 'krafla-cache';
const H_STORAGE = 'x-krafla-storage'; // 'opfs' on a marker
const H_SIZE = 'x-krafla-size';
const H_ABSENT = 'x-krafla-absent'; // an optional file of a Hugging Face folder that answered 404
const H_TIME = 'x-krafla-cached-at';

export const hasCaches = () => typeof caches === 'object' && caches !== null && typeof caches.open === 'function';
const hasOpfs = () => typeof navigator === 'object' && typeof navigator?.storage?.getDirectory === 'function';
// A URL as the Cache Storage of this global keys it (relative ones against this page or worker).
const abs = (u) => { try { return globalThis.location?.href ? new URL(u, globalThis.location.href).href : u; } catch { return u; } };
const nameOf = (cacheName) => (cacheName === true || cacheName == null ? DEFAULT_CACHE : String(cacheName));

// A file name for a URL: two 32-bit FNV-1a hashes and the length (the marker holds the URL itself).
function fileName(url) {
  let a = 0x811c9dc5;
  let b = 0x01000193;
  for (let i = 0; i < url.length; ++i) {
    const c = url.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193) >>> 0;
    b = Math.imul(b ^ c, 0x811c9dc5) >>> 0;
  }
  return `${a.toString(16).padStart(8, '0')}${b.toString(16).padStart(8, '0')}-${url.length}.bin`;
}

async function opfsDir(cacheName, create) {
  if (!hasOpfs()) return null;
  try {
    const root = await navigator.storage.getDirectory();
    const top = await root.getDirectoryHandle(OPFS_DIR, { create });
    return await top.getDirectoryHandle(encodeURIComponent(cacheName), { create });
  } catch {
    return null;
  }
}

async function openCache(cacheName) {
  if (!hasCaches()) return null;
  try { return await caches.open(nameOf(cacheName)); } catch { return null; }
}

/**
 * The cached copy of url: {stream, total, storage} (total: the bytes stored), {absent: true} for
 * an optional file known to be missing, or null. An OPFS marker whose file is gone is removed.
 */
export async function cacheMatch(cacheName, url) {
  const c = await openCache(cacheName);
  if (!c) return null;
  let res;
  try { res = await c.match(url); } catch { return null; }
  if (!res) return null;
  if (res.headers.get(H_ABSENT)) return { absent: true };
  if (res.headers.get(H_STORAGE) === 'opfs') {
    const total = Number(res.headers.get(H_SIZE));
    try {
      const dir = await opfsDir(nameOf(cacheName), false);
      const file = await (await dir.getFileHandle(fileName(url))).getFile();
      return { stream: file.stream(), total, storage: 'opfs' };
    } catch {
      await c.delete(url).catch(() => {});
      return null;
    }
  }
  return { stream: res.body, total: Number(res.headers.get('content-length')) || 0, storage: 'cache' };
}

/** Stores bytes under url (OPFS for large files); over quota, or without storage, does nothing. */
export async function cachePut(cacheName, url, bytes) {
  const c = await openCache(cacheName);
  if (!c) return;
  const headers = { 'content-type': 'application/octet-stream', [H_TIME]: new Date().toISOString() };
  if (bytes.length >= OPFS_MIN_BYTES) {
    const dir = await opfsDir(nameOf(cacheName), true);
    if (dir) {
      const name = fileName(url);
      try {
        const w = await (await dir.getFileHandle(name, { create: true })).createWritable();
        try {
          await w.write(bytes);
          await w.close(); // the file's new contents appear only now, whole
        } catch (e) {
          await w.abort().catch(() => {});
          throw e;
        }
        await c.put(url, new Response(null, { headers: { ...headers, [H_STORAGE]: 'opfs', [H_SIZE]: String(bytes.length) } }));
        return;
      } catch {
        await dir.removeEntry(name).catch(() => {}); // quota, or no createWritable (Safari's window): Cache Storage below
      }
    }
  }
  try {
    await c.put(url, new Response(bytes, { headers: { ...headers, 'content-length': String(bytes.length) } }));
  } catch { /* quota or a non-secure context: run without the cache */ }
}

/** Records that an optional file (url) is absent (HTTP 404), so that an offline load knows it. */
export async function cachePutAbsent(cacheName, url) {
  const c = await openCache(cacheName);
  await c?.put(url, new Response(null, { headers: { [H_ABSENT]: '1', [H_TIME]: new Date().toISOString() } })).catch(() => {});
}

// Removes one entry (its OPFS file too); true when there was one.
async function removeKey(c, cacheName, url) {
  const res = await c.match(url).catch(() => null);
  if (!res) return false;
  if (res.headers.get(H_STORAGE) === 'opfs') {
    const dir = await opfsDir(nameOf(cacheName), false);
    await dir?.removeEntry(fileName(url)).catch(() => {});
  }
  return c.delete(url).catch(() => false);
}

// The entries url stands for: itself, its llama2.c conversions (url?krafla-mlb=...), and with a
// trailing '/' (a Hugging Face folder) every file under it.
const covers = (url, key) => key === url || key.startsWith(`${url}?krafla-mlb=`) || key.startsWith(`${url}&krafla-mlb=`) ||
  (url.endsWith('/') && key.startsWith(url));

/** Removes url's entries (see covers); resolves to the number removed. */
export async function cacheDelete(cacheName, url) {
  const c = await openCache(cacheName);
  if (!c) return 0;
  url = abs(url);
  let n = (await removeKey(c, cacheName, url)) ? 1 : 0;
  for (const key of await keys(c)) if (key !== url && covers(url, key) && (await removeKey(c, cacheName, key))) ++n;
  return n;
}

async function keys(c) {
  try { return (await c.keys()).map((r) => (typeof r === 'string' ? r : r.url)); } catch { return []; }
}

/**
 * The entries: [{url, size, storage: 'cache' | 'opfs', cachedAt}] (a llama2.c conversion's url is
 * its key, `source` its checkpoint's URL; a folder's optional file known to be absent is left out).
 */
export async function cacheList(cacheName) {
  const c = await openCache(cacheName);
  if (!c) return [];
  const out = [];
  for (const url of await keys(c)) {
    const res = await c.match(url).catch(() => null);
    if (!res || res.headers.get(H_ABSENT)) continue;
    const opfs = res.headers.get(H_STORAGE) === 'opfs';
    const entry = {
      url,
      size: Number(res.headers.get(opfs ? H_SIZE : 'content-length')) || 0,
      storage: opfs ? 'opfs' : 'cache',
      cachedAt: res.headers.get(H_TIME),
    };
    const conv = url.search(/[?&]krafla-mlb=/);
    if (conv > 0) entry.source = url.slice(0, conv);
    out.push(entry);
  }
  return out;
}

/** Whether url (or its conversion, or with a trailing '/' any file under it) is cached. */
export async function cacheHas(cacheName, url) {
  const c = await openCache(cacheName);
  if (!c) return false;
  url = abs(url);
  return (await cacheList(cacheName)).some((e) => covers(url, e.url));
}

/** Empties the cache (Cache Storage and OPFS); resolves to the number of entries removed. */
export async function cacheClear(cacheName) {
  const name = nameOf(cacheName);
  const n = (await cacheList(name)).length;
  if (hasCaches()) await caches.delete(name).catch(() => {});
  if (hasOpfs()) {
    try {
      const top = await (await navigator.storage.getDirectory()).getDirectoryHandle(OPFS_DIR);
      await top.removeEntry(encodeURIComponent(name), { recursive: true });
    } catch { /* none */ }
  }
  return n;
}

/** Krafla.cache: the model cache as a web app manages it (index.d.ts: ModelCache). */
export const modelCache = {
  get supported() { return hasCaches(); },
  get opfs() { return hasOpfs(); },
  list: (cacheName) => cacheList(nameOf(cacheName)),
  has: async (url, cacheName) => cacheHas(nameOf(cacheName), urlOf(url)),
  delete: async (url, cacheName) => (await cacheDelete(nameOf(cacheName), urlOf(url))) > 0,
  clear: (cacheName) => cacheClear(nameOf(cacheName)),
  size: async (cacheName) => (await cacheList(nameOf(cacheName))).reduce((a, e) => a + e.size, 0),
};

function urlOf(url) {
  if (url instanceof URL) return url.href;
  if (typeof url !== 'string' || !url) throw new KraflaError('krafla: Krafla.cache: a URL (string or URL) is needed', 'arg');
  return url; // a relative one is the page's, as load() resolves it
}
