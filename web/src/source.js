// Reading a model's bytes from a URL, a Blob/File, an ArrayBuffer or a typed array, with progress
// events, an optional look at the header before the rest is read (so that a model that cannot fit
// is refused before its download), and the model cache for URLs (cache.js). A body must hold
// the bytes its Content-Length announces.
import { cacheDelete, cacheMatch } from './cache.js';
import { KraflaError } from './errors.js';

export function sourceName(src) {
  if (typeof src === 'string') return src;
  if (src instanceof URL) return src.href;
  if (typeof File === 'function' && src instanceof File) return src.name;
  if (typeof Blob === 'function' && src instanceof Blob) return 'the Blob';
  return 'the model bytes';
}

/** Kinds of error that say the bytes themselves are bad (so that a cached copy of them is dropped). */
export const isBadBytes = (e) => ['io', 'format', 'shape'].includes(e?.kind);

function concat(chunks, total) {
  const out = new Uint8Array(total);
  let o = 0;
  for (const c of chunks) { out.set(c, o); o += c.length; }
  return out;
}

/**
 * Whether a response's body must hold exactly its Content-Length bytes. Not when it is
 * content-encoded (the length counts the compressed bytes), nor for a cross-origin response whose
 * Content-Encoding the browser hides: there the network stack checks the length itself (a short
 * body is a read error, reported below) and the engine checks a model's file_size.
 */
function exactLength(res) {
  const enc = res.headers.get('content-encoding');
  if (enc) return enc.trim().toLowerCase() === 'identity';
  return res.type !== 'cors' && res.type !== 'opaque';
}

// Reads a stream of `total` bytes (0: unknown); calls check(head) once headBytes bytes (or the
// whole stream) have arrived and cancels the stream when it throws. With `exact`, a stream that
// ends short of total or runs past it is an 'io' KraflaError naming both counts, as is a read
// that fails (a connection closed early).
async function readStream(stream, total, { name, exact = false, check, progress, phase, headBytes = 256 }) {
  const reader = stream.getReader();
  const chunks = [];
  let loaded = 0;
  let checked = !check;
  let lastReport = 0;
  const counts = () => (total ? `expected ${total} bytes, received ${loaded}` : `received ${loaded} bytes`);
  progress?.({ phase, loaded: 0, total });
  for (;;) {
    let r;
    try {
      r = await reader.read();
    } catch (e) {
      throw new KraflaError(`${name}: the ${phase === 'cache' ? 'cached copy' : 'download'} broke off: ${counts()} (${e?.cause?.message ?? e?.message ?? e})`, 'io');
    }
    if (r.done) break;
    chunks.push(r.value);
    loaded += r.value.length;
    if (exact && total && loaded > total) {
      await reader.cancel().catch(() => {});
      throw new KraflaError(`${name}: expected ${total} bytes (its Content-Length), received ${loaded} or more: more than announced`, 'io');
    }
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
  if (exact && total && loaded !== total) {
    throw new KraflaError(`${name}: the ${phase === 'cache' ? 'cached copy' : 'download'} was cut short: expected ${total} bytes (its Content-Length), received ${loaded}`, 'io');
  }
  const bytes = concat(chunks, loaded);
  if (!checked) check(bytes);
  progress?.({ phase, loaded, total: total || loaded });
  return bytes;
}

/**
 * Returns {bytes: Uint8Array, fromCache} for src. For a URL with `cache` (a cache name: cache.js) a
 * cached copy is used when present (Cache Storage or OPFS); `cacheOnly` returns null on a miss instead of downloading.
 * Nothing is stored here: the caller stores a download (cachePut) once the engine has opened it.
 * A cached copy whose bytes are bad (its length, or check() with an 'io'/'format' error) is
 * deleted before the error is thrown, so that the next load downloads it again. With `missingOk`
 * a URL that answers HTTP 404 (a node path that does not exist) returns null: an optional file.
 */
export async function readSource(src, { cache = false, cacheOnly = false, missingOk = false, check, progress, phase = 'download', headBytes = 256 } = {}) {
  if (src instanceof URL) src = src.href;
  if (typeof src === 'string') {
    const cached = cache ? await cacheMatch(cache, src) : null;
    if (cached?.absent && missingOk) return null; // an optional file known to be missing (offline loads)
    if (cached && !cached.absent) {
      try {
        return { bytes: await readStream(cached.stream, cached.total, { name: src, exact: true, check, progress, phase: 'cache', headBytes }), fromCache: true };
      } catch (e) {
        if (isBadBytes(e)) {
          await cacheDelete(cache, src);
          e.message += ' (the cached copy was removed: the next load downloads it again)';
        }
        throw e;
      }
    }
    if (cacheOnly) return null;
    let res;
    try {
      res = await fetchUrl(src);
    } catch (e) {
      if (missingOk && e?.code === 'ENOENT') return null;
      throw new KraflaError(`${src}: the download failed (${e.message})`, 'io');
    }
    if (missingOk && res.status === 404) {
      await res.body?.cancel().catch(() => {});
      return null;
    }
    if (!res.ok) throw new KraflaError(`${src}: the download failed: HTTP ${res.status} ${res.statusText}`, 'io');
    const total = Number(res.headers.get('content-length')) || 0;
    const bytes = await readStream(res.body, total, { name: src, exact: exactLength(res), check, progress, phase, headBytes });
    return { bytes, fromCache: false };
  }
  const name = sourceName(src);
  if (typeof Blob === 'function' && src instanceof Blob) {
    if (check) check(new Uint8Array(await src.slice(0, headBytes).arrayBuffer()));
    return { bytes: await readStream(src.stream(), src.size, { name, exact: true, progress, phase: 'read', headBytes }), fromCache: false };
  }
  let bytes;
  if (src instanceof ArrayBuffer || (typeof SharedArrayBuffer === 'function' && src instanceof SharedArrayBuffer)) bytes = new Uint8Array(src);
  else if (ArrayBuffer.isView(src)) bytes = new Uint8Array(src.buffer, src.byteOffset, src.byteLength);
  else throw new KraflaError('krafla: a model is a URL string, a URL, an ArrayBuffer, a typed array, a Blob or a File', 'arg');
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
