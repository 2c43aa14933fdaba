#!/usr/bin/env python3
"""Limits and bad input, end to end (docs/reliability.md, "Limits and bad input").

usage: test_limits.py catalogue|sweep --bin BIN --ref-bin REF_BIN --shared SHARED --work WORK [--full]

catalogue: each known bad input (a file the converter must not write, a corrupt model, a bad
option value) exits with its documented code and a message naming the field, option or tensor.
sweep: the mutation sweep. stories260K.mlb truncated at spread offsets and with seeded byte
writes across its header, directory and tokenizer section; ml_run on every mutant must exit 0 or
2 with a message, never die on a signal, hang (timeout) or grow beyond the file plus its context's
cache (peak RSS from os.wait4). The default is a reduced sweep (64 truncations, 600 writes);
--full runs 256 truncations and 2,000 writes. Prints the counts. Python 3 standard library only.
"""
import argparse
import concurrent.futures
import os
import random
import struct
import subprocess
import sys
import threading
import time

import harness as h

ENV = None
FAILURES = h.Failures()
check = FAILURES.check


def run_child(cmd, timeout=30):
    """Runs cmd; returns (exit code or -signal, stderr text, peak RSS in KiB, timed out)."""
    p = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    killed = []

    def kill():
        killed.append(1)
        p.kill()

    timer = threading.Timer(timeout, kill)
    timer.start()
    err = p.stderr.read()
    p.stderr.close()
    _, status, ru = os.wait4(p.pid, 0)
    timer.cancel()
    p.returncode = 0  # reaped here; keep Popen from waiting again
    code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    return code, err.decode("utf-8", "replace"), ru.ru_maxrss, bool(killed)


def expect(args, code, needle, timeout=60):
    rc, err, _, hung = run_child(args, timeout)
    ok = check(not hung and rc == code and needle in err,
               "%s: exit %d (want %d), stderr %r (want %r)" % (" ".join(map(str, args))[-160:], rc, code,
                                                             err[-300:], needle))
    return ok, err


def write(name, data):
    path = ENV.path(name)
    with open(path, "wb") as f:
        f.write(data)
    return path


class Mlb:
    """Just enough of docs/format.md to find fields and tensors."""

    def __init__(self, data):
        self.b = bytes(data)
        self.n_tensors = struct.unpack_from("<I", data, 148)[0]
        self.dir_offset, self.tok_offset, self.tok_size = struct.unpack_from("<QQQ", data, 152)

    def entry(self, name):
        for i in range(self.n_tensors):
            e = self.dir_offset + 96 * i
            if self.b[e:e + 48].split(b"\0", 1)[0] == name.encode():
                return e
        raise KeyError(name)

    def data_offset(self, name):
        return struct.unpack_from("<Q", self.b, self.entry(name) + 64)[0]

    def scale_offset(self, name):
        return struct.unpack_from("<Q", self.b, self.entry(name) + 80)[0]


def random_model(name, layers=1, max_seq=16, extra=()):
    out = ENV.path(name)
    h.run([ENV.exe("ml_convert"), "random", "--dim", 64, "--hidden", 64, "--layers", layers, "--heads", 2,
           "--kv-heads", 1, "--vocab", 32, "--max-seq", max_seq, "-o", out] + list(extra))
    return out


def many_tensors(n):
    """A .mlb of n F32 1 x 1 tensors with a valid header (it parses; tok_embd is missing)."""
    data_at = (256 + 96 * n + 63) // 64 * 64
    size = data_at + 64 * n
    b = bytearray(size)
    b[0:8] = b"KRAFLMLB"
    for off, v in ((8, 1), (12, 256), (20, 64), (24, 96), (28, 2), (32, 4), (36, 2), (40, 16), (44, 40), (48, 16),
                   (52, 2), (136, 1), (140, 2), (148, n)):
        struct.pack_into("<I", b, off, v)
    for off, v in ((60, 1e-5), (64, 10000.0), (76, 1.0), (80, 1.0), (84, 1.0), (100, 1.0)):
        struct.pack_into("<f", b, off, v)
    struct.pack_into("<QQQQ", b, 152, 256, 0, 0, size)
    for i in range(n):
        e = 256 + 96 * i
        name = b"t.%d" % i
        b[e:e + len(name)] = name
        struct.pack_into("<IIIIQQQQ", b, e + 48, 0, 0, 1, 1, data_at + 64 * i, 4, 0, 0)
    return bytes(b)


# --- the catalogue ------------------------------------------------------------------------------

def catalogue():
    run_, conv, bench = ENV.exe("ml_run"), ENV.exe("ml_convert"), ENV.exe("ml_bench")
    model = h.stories260k(ENV, "q8")
    with open(model, "rb") as f:
        base = f.read()
    m = Mlb(base)
    with open(ENV.shared_path("models/tok512.bin"), "rb") as f:
        tok = f.read()
    gen = ["--tokens", "1 2 3", "-n", "1", "--temp", "0"]

    # The converter refuses what the loader refuses (model/limits.h): nothing is written.
    out = ENV.path("refused.mlb")
    for opt, val in (("--layers", "5000"), ("--max-seq", "4294967295"), ("--vocab", "4294967295")):
        args = {"--layers": 1, "--max-seq": 16, "--vocab": 32}
        args[opt] = val
        expect([conv, "random", "--dim", 64, "--hidden", 64, "--heads", 2, "--kv-heads", 1, "-o", out]
               + [x for k, v in args.items() for x in (k, v)], 2, opt + " " + val)
    nan_tok = bytearray(tok)
    struct.pack_into("<f", nan_tok, 4 + 8 + 5, float("nan"))  # token 1's score
    expect([conv, "llama2c", ENV.shared_path("models/stories260K.bin"), "--tokenizer",
            write("nan_tok.bin", nan_tok), "-o", out], 2, "token 1: score is NaN")
    check(not os.path.exists(out), "a refused conversion wrote %s" % out)

    # Strict option values: exit 2 naming the option.
    for opt, val in (("--seed", "-1"), ("--seed", "18446744073709551616"), ("--seed", "0x10"), ("--temp", ""),
                     ("--tokens", ""), ("--dump-logits", ""), ("--ctx", ""), ("-n", "")):
        expect([run_, model, opt, val] + (["-n", "1"] if opt != "-n" else []), 2,
               ("--steps" if opt == "-n" else opt))
    rc, err, _, _ = run_child([run_, model, "-p", "", "-n", "1", "--temp", "0"])
    check(rc == 0, "-p '' (BOS alone) must still run: exit %d %r" % (rc, err[-200:]))
    expect([conv, "random", "--dim", 64, "--hidden", 64, "--layers", 1, "--heads", 2, "--kv-heads", 1, "--vocab", 32,
            "--max-seq", 16, "--seed", "18446744073709551616", "-o", out], 2, "--seed")
    expect([ENV.exe("ml_tok"), model, "encode", "hi", "--vocab", ""], 2, "--vocab")

    # ml_bench: the context is checked before any work.
    for pf, dec in (("2147483647", "1"), ("2", "2147483647"), ("2", "600")):
        expect([bench, "--model", model, "--runs", 1, "--prefill", pf, "--decode", dec, "--no-kernels"], 2,
               "--prefill %s + --decode %s" % (pf, dec), timeout=60)

    # Corrupt models: each refused naming the field or tensor.
    b = bytearray(base)
    b[200] = 1
    expect([run_, write("reserved.mlb", b)] + gen, 2, "reserved byte 200")
    b = bytearray(base)
    struct.pack_into("<I", b, m.tok_offset + 4, 7)
    expect([run_, write("tok_reserved.mlb", b)] + gen, 2, "tokenizer section: reserved field is 7")
    b = bytearray(base)
    struct.pack_into("<I", b, 28, 4)  # n_layers 5 -> 4: blk.4.* unused
    expect([run_, write("fewer_layers.mlb", b)] + gen, 2, "tensor blk.4.attn_norm is not used")
    b = bytearray(base)
    struct.pack_into("<f", b, m.data_offset("blk.2.ffn_norm") + 8, float("nan"))
    expect([run_, write("nan_norm.mlb", b)] + gen, 2, "tensor blk.2.ffn_norm: value 2 is nan")
    b = bytearray(base)
    struct.pack_into("<f", b, m.scale_offset("blk.3.attn_q") + 4, float("inf"))
    expect([run_, write("inf_scale.mlb", b)] + gen, 2, "tensor blk.3.attn_q: block scale 1 is not finite")
    b = bytearray(base)
    e = m.entry("blk.0.ffn_up")
    b[e:e + 48] = b"\x1b]0;owned\x07\x1b[2J".ljust(48, b"\0")
    struct.pack_into("<I", b, e + 48, 9)
    ok, err = expect([run_, write("binary_name.mlb", b)] + gen, 2, "tensor \\x1b]0;owned\\x07\\x1b[2J: unknown type 9")
    check(not any(ord(c) < 0x20 and c != "\n" for c in err), "a control byte reached the terminal: %r" % err)

    # -z: the message names the file once and is intact.
    neg = bytearray(tok)
    struct.pack_into("<i", neg, 8, -1)
    negp = write("tokneg.bin", neg)
    ok, err = expect([run_, model, "-z", negp] + gen, 2, "token 0: len -1 is negative")
    check(err.count(negp) == 1 and err.startswith("ml_run: " + negp + ": tokenizer: token 0"),
          "-z message: %r" % err)

    # 100,000 tensors: the directory checks are not quadratic (they took over 20 s).
    big = write("many_tensors.mlb", many_tensors(100000))
    t0 = time.time()
    expect([run_, big] + gen, 2, "tensor tok_embd is missing", timeout=60)
    dt = time.time() - t0
    print("100,000 tensors refused in %.2f s" % dt)
    check(dt < 10, "100,000 tensors took %.1f s" % dt)

    # A huge max_seq: the default context is capped and says so; a --ctx beyond RAM fails at once
    # naming --ctx (exit 1, out of memory).
    seq = random_model("maxseq24.mlb", layers=1, max_seq=16777216)
    rc, err, _, _ = run_child([run_, seq] + gen)
    check(rc == 0 and "ctx 4096 is the default cap (the model's max_seq is 16777216)" in err,
          "default context cap: exit %d, %r" % (rc, err[-300:]))
    deep = random_model("deep24.mlb", layers=200, max_seq=16777216)
    t0 = time.time()
    ok, err = expect([run_, deep, "--ctx", "16777216"] + gen, 1, "a context of 16777216 (--ctx")
    check(time.time() - t0 < 10, "the refusal of --ctx 16777216 took %.1f s" % (time.time() - t0))


# --- the mutation sweep -------------------------------------------------------------------------

INTERESTING = (0, 1, 0x7F, 0xFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0xFFFFFFFE, 4097, 16777217)


def mutants(base, n_trunc, n_writes, seed=13):
    """Yields (label, bytes): truncations at n_trunc spread offsets, then n_writes seeded writes
    spread over the header, the directory and the tokenizer section (a random byte, or an
    interesting u32 at an aligned offset)."""
    m = Mlb(base)
    size = len(base)
    for i in range(n_trunc):
        cut = i * size // n_trunc
        yield "truncate %d" % cut, base[:cut]
    regions = (("header", 0, 256), ("directory", m.dir_offset, m.dir_offset + 96 * m.n_tensors),
               ("tokenizer", m.tok_offset, m.tok_offset + m.tok_size))
    rng = random.Random(seed)
    for k in range(n_writes):
        name, lo, hi = regions[k % 3]
        b = bytearray(base)
        if rng.random() < 0.5:
            off = rng.randrange(lo, hi)
            b[off] = rng.randrange(256)
            yield "%s byte %d = 0x%02x" % (name, off, b[off]), bytes(b)
        else:
            off = lo + rng.randrange((hi - lo) // 4) * 4
            v = rng.choice(INTERESTING) if rng.random() < 0.7 else rng.randrange(1 << 32)
            struct.pack_into("<I", b, off, v)
            yield "%s u32 at %d = 0x%x" % (name, off, v), bytes(b)


def sweep(full):
    model = h.stories260k(ENV, "q8")
    with open(model, "rb") as f:
        base = f.read()
    args = ["-p", "Once upon a time", "-n", "1", "--temp", "0"]
    rc, err, clean_rss, _ = run_child([ENV.exe("ml_run"), model] + args)
    check(rc == 0, "the clean model: exit %d %r" % (rc, err))
    # Generous: the clean run, twice the file, and the largest default context's f32 cache
    # (4096 positions; any layer count the directory could satisfy is the file's own).
    bound_kib = clean_rss + 2 * len(base) // 1024 + 64 * 1024
    n_trunc, n_writes = (256, 2000) if full else (64, 600)
    work = ENV.path("mutants")
    os.makedirs(work, exist_ok=True)
    counts, bad = {}, []
    lock = threading.Lock()

    def one(item):
        i, (label, data) = item
        path = os.path.join(work, "m%d_%d.mlb" % (threading.get_ident() % 100000, i % 2))
        with open(path, "wb") as f:
            f.write(data)
        t0 = time.time()
        rc, err, rss, hung = run_child([ENV.exe("ml_run"), path] + args, timeout=30)
        with lock:
            key = "timeout" if hung else ("signal %d" % -rc if rc < 0 else "exit %d" % rc)
            counts[key] = counts.get(key, 0) + 1
            problem = None
            if hung or rc not in (0, 2):
                problem = key
            elif rc == 2 and not err.strip().startswith("ml_run: "):
                problem = "exit 2 without a message"
            elif rss > bound_kib:
                problem = "peak RSS %d KiB above %d KiB" % (rss, bound_kib)
            if problem:
                bad.append("%s: %s (%.1f s): %s" % (label, problem, time.time() - t0, err.strip()[-200:]))

    t0 = time.time()
    # Two children at a time, mutants made on demand: this process stays small, which matters
    # because a child's ru_maxrss also counts the copy of this process it was forked from.
    source = enumerate(mutants(base, n_trunc, n_writes))
    taken = [0]

    def worker():
        while True:
            with lock:
                item = next(source, None)
                if item is None:
                    return
                taken[0] += 1
            one(item)

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        for f in [pool.submit(worker) for _ in range(2)]:
            f.result()
    total = taken[0]
    clean = total - len(bad)
    print("mutation sweep (%s): %d mutants (%d truncations, %d writes) in %.0f s; %d clean; by outcome: %s; "
          "peak RSS bound %d KiB (clean run %d KiB)"
          % ("full" if full else "reduced", total, n_trunc, n_writes, time.time() - t0, clean,
             ", ".join("%s: %d" % kv for kv in sorted(counts.items())), bound_kib, clean_rss))
    for b in bad[:30]:
        print("BAD:", b)
    check(not bad, "%d of %d mutants misbehaved" % (len(bad), total))


def main():
    global ENV
    ap = argparse.ArgumentParser()
    ap.add_argument("group", choices=("catalogue", "sweep"))
    ap.add_argument("--full", action="store_true")
    ENV, a = h.env_from_args(ap, ref_bin=True)
    h.skip_if_cpu_lacks_isa(ENV)
    catalogue() if a.group == "catalogue" else sweep(a.full)
    print("test_limits %s: %d failures" % (a.group, len(FAILURES)))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
