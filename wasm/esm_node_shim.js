// Emscripten 3.1.6's ES-module glue calls require() and reads __dirname when it runs in node,
// neither of which exists in an ES module scope: define both there (../shared/TOOLCHAIN.md §1).
// In browsers and workers this does nothing.
if (typeof process === 'object' && typeof process.versions === 'object' && typeof process.versions.node === 'string') {
  const { createRequire } = await import('node:module');
  const { dirname } = await import('node:path');
  const { fileURLToPath } = await import('node:url');
  globalThis.require = createRequire(import.meta.url);
  globalThis.__dirname = dirname(fileURLToPath(import.meta.url));
}
