// Prepended (--extern-pre-js) to the ES-module builds: Emscripten 3.1.6's node path uses
// require() and __dirname, which an ES module lacks (../shared/TOOLCHAIN.md section 1).
if (typeof process === 'object' && process.versions && process.versions.node && typeof window === 'undefined' &&
    typeof importScripts === 'undefined') {
  const { createRequire } = await import('node:module');
  const { dirname } = await import('node:path');
  const { fileURLToPath } = await import('node:url');
  globalThis.require = createRequire(import.meta.url);
  globalThis.__dirname = dirname(fileURLToPath(import.meta.url));
}
