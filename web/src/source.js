// Reading a model's bytes from a URL, a Blob/File, an ArrayBuffer or a typed array, with progress
// events, an optional look at the header before the rest is read (so that a model that cannot fit
// is refused before its download), and an optional Cache Storage cache for URLs.

export function sourceName(src) {
  if (typeof src === 'string') return src;
  if (src instanceof URL) return src.href;
  if (typeof File === 'function' && src instanceof File) return src.name;
  if (typeof Blob === 'function' && src instanceof Blob) return 'the Blob';
  return 'the model bytes';
}

const hasCaches = () => typeof caches === 'object' && caches !== null && typeof caches.open === 'function';

export async function cachePut(cacheName, key, bytes) {
  if (!cacheName || !hasCaches()) return;
  try {
    const c = await caches.open(cacheName);
    await c.put(key, new Response(bytes, { headers: { 'content-type': 'application/octet-stream', 'content-length': String(bytes.length) } }));
  } catch { /* quota or a non-secure context: run without the cache */ }
}

function concat(chunks, total) {
  const out = new Uint8Array(total);
  let o = 0;
  for (const c of chunks) { out.set(c, o); o += c.length; }
  return out;
}

// Reads a stream; calls check(head) once headBytes bytes (or the whole stream) have arrived and
// cancels the stream when it throws.
async function readStream(stream, total, { check, progress, phase, headBytes = 256 }) {
  const reader = stream.getReader();
  const chunks = [];
  let loaded = 0;
  let checked = !check;
  let lastReport = 0;
  progress?.({ phase, loaded: 0, total });
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    loaded += value.length;
    if (!checked && loaded >= headBytes) {
      checked = true;
      try {
        check(concat(chunks, loaded).subarray(0, headBytes));
      } catch (e) {
        await reader.cancel().catch(() => {});
        throw e;
      }
    }
    const now = Date.now();
    if (now - lastReport > 50) { lastReport = now; progress?.({ phase, loaded, total }); }
  }
  const bytes = concat(chunks, loaded);
  if (!checked) check(bytes);
  progress?.({ phase, loaded, total: total || loaded });
  return bytes;
}

/**
 * Returns {bytes: Uint8Array, fromCache} for src. For a URL with `cache` (a Cache Storage name)
 * a cached copy is used when present and the download is stored otherwise (when cacheIf(), if
 * given, agrees); `cacheOnly` returns null on a miss instead of downloading.
 */
export async function readSource(src, { cache = false, cacheOnly = false, cacheIf, check, progress, phase = 'download', headBytes = 256 } = {}) {
  if (src instanceof URL) src = src.href;
  if (typeof src === 'string') {
    let cached = null;
    if (cache && hasCaches()) {
      try { cached = await (await caches.open(cache)).match(src); } catch { cached = null; }
    }
    if (cached) {
      const total = Number(cached.headers.get('content-length')) || 0;
      return { bytes: await readStream(cached.body, total, { check, progress, phase: 'cache', headBytes }), fromCache: true };
    }
    if (cacheOnly) return null;
    let res;
    try {
      res = await fetchUrl(src);
    } catch (e) {
      throw new Error(`${src}: the download failed (${e.message})`);
    }
    if (!res.ok) throw new Error(`${src}: the download failed: HTTP ${res.status} ${res.statusText}`);
    const total = Number(res.headers.get('content-length')) || 0;
    const bytes = await readStream(res.body, total, { check, progress, phase, headBytes });
    if (cache && (!cacheIf || cacheIf())) await cachePut(cache, src, bytes);
    return { bytes, fromCache: false };
  }
  if (typeof Blob === 'function' && src instanceof Blob) {
    if (check) check(new Uint8Array(await src.slice(0, headBytes).arrayBuffer()));
    return { bytes: await readStream(src.stream(), src.size, { progress, phase: 'read', headBytes }), fromCache: false };
  }
  let bytes;
  if (src instanceof ArrayBuffer || (typeof SharedArrayBuffer === 'function' && src instanceof SharedArrayBuffer)) bytes = new Uint8Array(src);
  else if (ArrayBuffer.isView(src)) bytes = new Uint8Array(src.buffer, src.byteOffset, src.byteLength);
  else throw new Error('krafla: a model is a URL string, a URL, an ArrayBuffer, a typed array, a Blob or a File');
  if (check) check(bytes.subarray(0, headBytes));
  progress?.({ phase: 'read', loaded: bytes.length, total: bytes.length });
  return { bytes, fromCache: false };
}

// fetch, or the file system for file: URLs and paths in node.
async function fetchUrl(src) {
  const isNode = typeof process === 'object' && !!process.versions?.node;
  if (isNode && (src.startsWith('file:') || src.startsWith('/') || src.startsWith('.'))) {
    const fs = await import('node:fs');
    const { Readable } = await import('node:stream');
    const path = src.startsWith('file:') ? new URL(src) : src;
    const st = await fs.promises.stat(path);
    return new Response(Readable.toWeb(fs.createReadStream(path)), { headers: { 'content-length': String(st.size) } });
  }
  return fetch(src);
}
