// Unsupported GGUF files for the tests, made from a supported one by patching bytes in place (the
// layout from the GGUF spec: header, key/values, tensor infos). The engine must refuse each with
// a message that names what is unsupported.
import { readFileSync, writeFileSync } from 'node:fs';

const SCALAR_BYTES = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
export const GGUF_TYPE = { F32: 0, F16: 1, Q8_0: 8, Q8_1: 9 };

/** Offsets in a GGUF file: each key's value ({key: {type, at}}) and each tensor's type field ({name: at}). */
export function ggufLayout(b) {
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  if (new TextDecoder().decode(b.subarray(0, 4)) !== 'GGUF') throw new Error('not a GGUF file');
  let pos = 8;
  const u32 = () => { const x = v.getUint32(pos, true); pos += 4; return x; };
  const u64 = () => { const x = Number(v.getBigUint64(pos, true)); pos += 8; return x; };
  const str = () => { const n = u64(); const s = new TextDecoder().decode(b.subarray(pos, pos + n)); pos += n; return s; };
  const skip = (t) => {
    if (t === 8) { const n = u64(); pos += n; return; }
    if (t === 9) { const et = u32(); const n = u64(); for (let i = 0; i < n; ++i) skip(et); return; }
    if (!SCALAR_BYTES[t]) throw new Error(`value type ${t}`);
    pos += SCALAR_BYTES[t];
  };
  const nTensors = u64();
  const nKv = u64();
  const keys = {};
  for (let i = 0; i < nKv; ++i) {
    const key = str();
    const type = u32();
    keys[key] = { type, at: pos };
    skip(type);
  }
  const tensors = {};
  for (let i = 0; i < nTensors; ++i) {
    const name = str();
    const nDims = u32();
    pos += 8 * nDims;
    tensors[name] = pos;
    pos += 4 + 8; // type, offset
  }
  return { keys, tensors };
}

/** Writes a copy of the GGUF file `from` with general.architecture set to `arch` (as long as the original's). */
export function withArchitecture(from, to, arch) {
  const b = new Uint8Array(readFileSync(from));
  const { at } = ggufLayout(b).keys['general.architecture'];
  const n = Number(new DataView(b.buffer).getBigUint64(at, true));
  if (arch.length !== n) throw new Error(`the architecture must have ${n} letters`);
  b.set(new TextEncoder().encode(arch), at + 8);
  writeFileSync(to, b);
}

/** Writes a copy with tensor `name`'s type set to `type` (a smaller tensor: its data stays in place). */
export function withTensorType(from, to, name, type) {
  const b = new Uint8Array(readFileSync(from));
  const at = ggufLayout(b).tensors[name];
  if (at === undefined) throw new Error(`no tensor ${name}`);
  new DataView(b.buffer).setUint32(at, type, true);
  writeFileSync(to, b);
}
