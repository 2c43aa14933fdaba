// krafla: LLM inference in WebAssembly, in a Web Worker (browsers) or a worker_thread (node).
export { Krafla } from './client.js';
export { KraflaError } from './errors.js';
export { chooseBuild, detectFeatures, BUILD_ORDER } from './detect.js';
export { parseHeader, estimateMemory, checkFits, WASM32_MAX_BYTES } from './header.js';
