// Feature detection and the choice of a wasm build: relaxed SIMD -> simd128 -> scalar, and the
// threaded (pthreads) variant only where shared memory works (a cross-origin isolated page, a
// worker of one, or node). The probes are wasm-feature-detect's modules, validated (not run).

const SIMD128 = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 10, 1, 8, 0, 65, 0,
  253, 15, 253, 98, 11]);
// i8x16.relaxed_swizzle: validates only where relaxed SIMD is on.
const RELAXED = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 15, 1, 13, 0, 65, 1,
  253, 15, 65, 2, 253, 15, 253, 128, 2, 11]);

/** Every build the package knows, best ISA first, threaded before single-threaded within an ISA. */
export const BUILD_ORDER = ['wasm_relaxed_mt', 'wasm_relaxed', 'wasm_simd128_mt', 'wasm_simd128', 'wasm_scalar_mt',
  'wasm_scalar'];

const isNode = () => typeof process === 'object' && !!process.versions?.node && typeof window === 'undefined';

function validate(bytes) {
  try {
    return typeof WebAssembly === 'object' && WebAssembly.validate(bytes);
  } catch {
    return false;
  }
}

/** What this JavaScript environment offers the wasm builds. */
export function detectFeatures() {
  const node = isNode();
  let sharedMemory = false;
  try {
    sharedMemory = typeof SharedArrayBuffer === 'function' &&
      new WebAssembly.Memory({ initial: 1, maximum: 1, shared: true }).buffer instanceof SharedArrayBuffer;
  } catch {
    sharedMemory = false;
  }
  const isolated = node ? true : globalThis.crossOriginIsolated === true;
  // Node 20 has no navigator: 0 (unknown) there, and the worker asks os.availableParallelism().
  const cores = globalThis.navigator?.hardwareConcurrency ?? (node ? 0 : 1);
  return {
    wasm: typeof WebAssembly === 'object',
    simd128: validate(SIMD128),
    relaxedSimd: validate(RELAXED),
    crossOriginIsolated: isolated,
    sharedMemory,
    threads: isolated && sharedMemory,
    hardwareConcurrency: cores,
    node,
  };
}

/**
 * Picks the best build among `available` (names from BUILD_ORDER) for `features`.
 * `threads`: false forbids the threaded builds, true prefers them (when possible), a number > 1
 * as true. `force`: a build name to use regardless (still checked against the features).
 * Returns { name, isa, threaded, reason } or throws when nothing fits.
 */
export function chooseBuild(available, features, { threads = true, force } = {}) {
  const why = [];
  why.push(features.relaxedSimd ? 'relaxed SIMD: yes' : 'relaxed SIMD: no');
  why.push(features.simd128 ? 'simd128: yes' : 'simd128: no');
  if (features.threads) why.push(features.node ? 'threads: yes (node)' : 'threads: yes (cross-origin isolated)');
  else if (!features.crossOriginIsolated) why.push('threads: no (the page is not cross-origin isolated: it needs COOP/COEP headers)');
  else why.push('threads: no (no shared WebAssembly memory)');
  if (threads === false || threads === 1) why.push('threads: not wanted');

  const fits = (name) => {
    const threaded = name.endsWith('_mt');
    if (name.startsWith('wasm_relaxed') && !features.relaxedSimd) return false;
    if (name.startsWith('wasm_simd128') && !features.simd128) return false;
    if (threaded && !features.threads) return false;
    return true;
  };
  const describe = (name, reason) => ({
    name,
    isa: name.replace(/^wasm_/, '').replace(/_mt$/, ''),
    threaded: name.endsWith('_mt'),
    reason,
  });
  if (force) {
    if (!available.includes(force)) throw new Error(`krafla: build ${force} is not available (have: ${available.join(', ') || 'none'})`);
    if (!fits(force)) throw new Error(`krafla: build ${force} cannot run here (${why.join('; ')})`);
    return describe(force, `forced; ${why.join('; ')}`);
  }
  const wantThreads = threads !== false && threads !== 1;
  // Where threads can run, a threaded build beats a single-threaded one of a higher ISA (two
  // cores of simd128 outrun one of relaxed SIMD); the ISA order holds within each group.
  const multiCore = features.hardwareConcurrency > 1 || typeof threads === 'number';
  let preferred = wantThreads ? [...BUILD_ORDER] : BUILD_ORDER.filter((n) => !n.endsWith('_mt'));
  if (wantThreads && features.threads && multiCore) {
    preferred = [...preferred.filter((n) => n.endsWith('_mt')), ...preferred.filter((n) => !n.endsWith('_mt'))];
  }
  const usable = preferred.filter(fits);
  const chosen = usable.find((n) => available.includes(n));
  if (chosen) {
    const skipped = usable.slice(0, usable.indexOf(chosen));
    return describe(chosen, `${why.join('; ')}${skipped.length ? `; not built: ${skipped.join(', ')}` : ''}`);
  }
  throw new Error(`krafla: no wasm build fits this environment (${why.join('; ')}; available: ${available.join(', ') || 'none'})`);
}
