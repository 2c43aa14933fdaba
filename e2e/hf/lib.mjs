// Shared helpers of the e2e/hf tests: the Rust library (oracle), calling $KRAFLA_TOK, and reports.
//
// $KRAFLA_TOK command-line contract (see tokenizers.test.mjs for the proposed `batch` mode):
//   KRAFLA_TOK FILE encode [--add-special] TEXT   ids on one line, space-separated (TEXT "-": stdin)
//   KRAFLA_TOK FILE encode --offsets TEXT         "id\tpiece as JSON string\tbegin end" per token (bytes)
//   KRAFLA_TOK FILE decode [--skip-special] IDS   the text, no newline added (IDS: one argument,
//                                                 space-separated; "-": read them from stdin)
//   KRAFLA_TOK FILE batch                         optional: JSON lines in, JSON lines out (below)
//   exit 2 + a message on bad input.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
export const { Tokenizer } = require('tokenizers');
const here = path.dirname(fileURLToPath(import.meta.url));

export const KRAFLA_TOK = process.env.KRAFLA_TOK || '';
export const FAKE_TOK = path.join(here, 'fake_tok.mjs');
export const CONCURRENCY = Number(process.env.KRAFLA_HF_JOBS || Math.max(1, Math.min(4, os.cpus().length)));
export const TIMEOUT_MS = Number(process.env.KRAFLA_HF_TIMEOUT_MS || 60000);

// Runs $KRAFLA_TOK args with stdin; never rejects. { code, signal, stdout: Buffer, stderr: string, ms }.
export function runTok(args, stdin = '', { tool = KRAFLA_TOK, timeoutMs = TIMEOUT_MS } = {}) {
  return new Promise((resolve) => {
    const t0 = Date.now();
    const cmd = tool.endsWith('.mjs') ? process.execPath : tool;
    const argv = tool.endsWith('.mjs') ? [tool, ...args] : args;
    const p = spawn(cmd, argv, { stdio: ['pipe', 'pipe', 'pipe'] });
    const out = [], err = [];
    let timedOut = false;
    const timer = setTimeout(() => { timedOut = true; p.kill('SIGKILL'); }, timeoutMs);
    p.stdout.on('data', (d) => out.push(d));
    p.stderr.on('data', (d) => err.push(d));
    p.stdin.on('error', () => {}); // the tool may exit before reading all of stdin
    p.on('error', (e) => { clearTimeout(timer); resolve({ code: -1, signal: null, stdout: Buffer.alloc(0), stderr: String(e), ms: Date.now() - t0, timedOut }); });
    p.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout: Buffer.concat(out), stderr: Buffer.concat(err).toString(), ms: Date.now() - t0, timedOut });
    });
    p.stdin.end(stdin);
  });
}

// Maps items through async fn with at most n in flight; keeps the order.
export async function pool(items, n, fn) {
  const out = new Array(items.length);
  let next = 0;
  const worker = async () => { while (next < items.length) { const i = next++; out[i] = await fn(items[i], i); } };
  await Promise.all(Array.from({ length: Math.min(n, items.length) }, worker));
  return out;
}

export const parseIds = (s) => s.trim() === '' ? [] : s.trim().split(/\s+/).map(Number);

export async function kraflaEncode(file, text, addSpecial, opts) {
  const r = await runTok([file, 'encode', ...(addSpecial ? ['--add-special'] : []), '-'], text, opts);
  return { ...r, ids: r.code === 0 ? parseIds(r.stdout.toString()) : null };
}
export async function kraflaDecode(file, ids, skipSpecial, opts) {
  const s = ids.join(' ');
  const big = s.length > 100000; // one argv string is limited to 128 KiB on Linux
  const r = await runTok([file, 'decode', ...(skipSpecial ? ['--skip-special'] : []), big ? '-' : s], big ? s : '', opts);
  return { ...r, text: r.code === 0 ? r.stdout.toString('utf8') : null };
}
// [{ id, piece, begin, end }]
export async function kraflaOffsets(file, text, opts) {
  const r = await runTok([file, 'encode', '--offsets', '-'], text, opts);
  if (r.code !== 0) return { ...r, toks: null };
  const toks = r.stdout.toString('utf8').split('\n').filter((l) => l !== '').map((l) => {
    const [id, piece, be] = l.split('\t');
    const [begin, end] = be.split(' ').map(Number);
    return { id: Number(id), piece: JSON.parse(piece), begin, end };
  });
  return { ...r, toks };
}

// Batch mode: stdin has one JSON array per line, stdout one JSON object per line, in order:
//   ["encode", addSpecial, "text"]        -> {"ids": [...], "offsets": [[begin, end], ...]} (offsets optional, bytes)
//   ["decode", skipSpecial, [ids...]]     -> {"text": "..."}
//   anything the tool refuses             -> {"error": "message"}
export async function kraflaBatch(file, requests, opts) {
  const stdin = requests.map((q) => JSON.stringify(q) + '\n').join('');
  const r = await runTok([file, 'batch'], stdin, opts);
  if (r.code !== 0) return { ...r, replies: null };
  const lines = r.stdout.toString('utf8').split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  return { ...r, replies: lines.map((l) => JSON.parse(l)) };
}
export async function supportsBatch(file, tool = KRAFLA_TOK) {
  const r = await runTok([file, 'batch'], '', { tool });
  return r.code === 0 && r.stdout.length === 0;
}

// Character (code point) offsets of the node binding -> UTF-8 byte offsets.
export function charToByteOffsets(text, offsets) {
  const cps = Array.from(text);
  const at = new Array(cps.length + 1);
  at[0] = 0;
  for (let i = 0; i < cps.length; i++) at[i + 1] = at[i] + Buffer.byteLength(cps[i]);
  return offsets.map(([b, e]) => [at[b], at[e]]);
}

export async function hfEncode(tok, text, addSpecial) {
  const e = await tok.encode(text, null, { addSpecialTokens: addSpecial });
  return { ids: e.getIds(), tokens: e.getTokens(), offsets: charToByteOffsets(text, e.getOffsets()) };
}

export const firstDiff = (a, b) => {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return a.length === b.length ? -1 : n;
};
const clip = (s, n = 600) => (s.length > n ? `${s.slice(0, n)}… (${s.length} chars)` : s);
// A failure report: the string JSON-escaped, both id lists around the first differing index.
export function diffReport(what, text, want, got, extra = '') {
  const i = firstDiff(want, got);
  const win = (a) => `[${a.slice(Math.max(0, i - 5), i + 10).join(' ')}]${a.length > i + 10 ? '…' : ''}`;
  return `${what}${extra ? ` (${extra})` : ''}: text ${clip(JSON.stringify(text))}\n` +
    `  first difference at index ${i}; hf ${want.length} ids, krafla ${got.length} ids\n` +
    `  hf     ${i > 5 ? '…' : ''}${win(want)}\n  krafla ${i > 5 ? '…' : ''}${win(got)}\n` +
    (want.length + got.length < 200 ? `  hf all     [${want.join(' ')}]\n  krafla all [${got.join(' ')}]\n` : '');
}
export function textDiffReport(what, ids, want, got) {
  const a = Array.from(want), b = Array.from(got);
  const i = firstDiff(a, b);
  return `${what}: ids [${clip(ids.join(' '), 400)}]\n  first difference at char ${i}\n` +
    `  hf     ${clip(JSON.stringify(want))}\n  krafla ${clip(JSON.stringify(got))}\n`;
}
