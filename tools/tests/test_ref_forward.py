#!/usr/bin/env python3
"""Tests of the oracle itself: ref_forward against a numpy forward pass written here from the
specification (docs/format.md, docs/tools.md, llama2.c's export.py), and compare_logits.py
against hand-built logits. Python 3 stdlib + numpy.

  test_ref_forward.py --ref-forward BIN --compare compare_logits.py --shared DIR CASE
CASE: llama2c_random | mlb_random | stories260k | errors | compare_logits
"""
import argparse
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

F32, F64 = np.float32, np.float64
TIGHT = 1e-9  # ref_forward (C++, BLAS) vs numpy, both float64: only summation order differs

# ----------------------------------------------------------------------------------------------
# The numpy reference: a model is a dict of float64 arrays plus hyperparameters.


def q8_group(x):
    """The Q8 rule over one group, in float32; returns (integer quants as float64, d)."""
    xf = np.asarray(x, dtype=F64).astype(F32)
    amax = np.abs(xf).max()
    if not amax >= F32(1e-30):
        return np.zeros(len(xf)), 0.0
    d = F32(amax / F32(127))
    inv = F32(F32(127) / amax)
    v = (xf * inv).astype(F32)
    v = (v + np.copysign(F32(0.5), xf).astype(F32)).astype(F32)
    return np.clip(np.trunc(v), -127, 127).astype(F64), float(d)


def act_q8(x):
    out = np.zeros(len(x))
    for b in range(0, len(x), 32):
        q, d = q8_group(x[b:b + 32])
        out[b:b + 32] = q * d
    return out


def rmsnorm(x, w, eps):
    return w * x / np.sqrt(np.mean(x * x) + eps)


def rope(v, n_heads, hd, pos, theta, rope_type):
    v = v.copy()
    half = hd // 2
    i = np.arange(half)
    ang = pos * theta ** (-2.0 * i / hd)
    c, s = np.cos(ang), np.sin(ang)
    for h in range(n_heads):
        head = v[h * hd:(h + 1) * hd]
        a, b = (2 * i, 2 * i + 1) if rope_type == 0 else (i, i + half)
        x0, x1 = head[a].copy(), head[b].copy()
        head[a] = x0 * c - x1 * s
        head[b] = x0 * s + x1 * c
    return v


def np_forward(m, tokens, quantized, kv="f64"):
    """Logits (len(tokens) x vocab), one position at a time."""
    act = act_q8 if quantized else (lambda a: a)
    hd, nh, nkv, L = m["head_dim"], m["n_heads"], m["n_kv_heads"], len(m["layers"])
    kvdim = nkv * hd
    T = len(tokens)
    K = np.zeros((L, T, kvdim))
    V = np.zeros((L, T, kvdim))
    KD = np.zeros((L, T, nkv))
    out = []
    for pos, tok in enumerate(tokens):
        x = m["emb"][tok] * m["embed_scale"]
        for l, ly in enumerate(m["layers"]):
            h = act(rmsnorm(x, ly["attn_norm"], m["eps"]))
            q = rope(ly["wq"] @ h, nh, hd, pos, m["theta"], m["rope_type"])
            k = rope(ly["wk"] @ h, nkv, hd, pos, m["theta"], m["rope_type"])
            v = ly["wv"] @ h
            if kv == "f64":
                K[l, pos], V[l, pos] = k, v
            elif kv == "f32":
                K[l, pos], V[l, pos] = k.astype(F32), v.astype(F32)
            elif kv == "f16":
                K[l, pos], V[l, pos] = k.astype(np.float16), v.astype(np.float16)
            else:  # q8: one scale per position and KV head
                for g in range(nkv):
                    sl = slice(g * hd, (g + 1) * hd)
                    K[l, pos, sl], KD[l, pos, g] = q8_group(k[sl])
                    vq, vd = q8_group(v[sl])
                    V[l, pos, sl] = vq * vd
            o = np.zeros(nh * hd)
            for hh in range(nh):
                g = hh // (nh // nkv)
                sl = slice(g * hd, (g + 1) * hd)
                qh = q[hh * hd:(hh + 1) * hd]
                if kv == "q8":
                    qq, qd = q8_group(qh)
                    s = (K[l, :pos + 1, sl] @ qq) * qd * KD[l, :pos + 1, g] / np.sqrt(hd)
                else:
                    s = (K[l, :pos + 1, sl] @ qh) / np.sqrt(hd)
                e = np.exp(s - s.max())
                o[hh * hd:(hh + 1) * hd] = V[l, :pos + 1, sl].T @ (e / e.sum())
            x = x + ly["wo"] @ act(o)
            h = act(rmsnorm(x, ly["ffn_norm"], m["eps"]))
            gate, up = ly["w1"] @ h, ly["w3"] @ h
            x = x + ly["w2"] @ act(gate / (1.0 + np.exp(-gate)) * up)
        wcls = m["emb"] if m["wcls"] is None else m["wcls"]
        out.append(wcls @ act(rmsnorm(x, m["out_norm"], m["eps"])))
    return np.array(out)


def greedy(m, prompt, n, quantized, kv="f64"):
    ids = list(prompt)
    for _ in range(n):
        ids.append(int(np.argmax(np_forward(m, ids, quantized, kv)[-1])))
    return ids


# ----------------------------------------------------------------------------------------------
# Random models and writers (llama2.c legacy / version 1, .mlb).


def random_float_model(rng, dim, hidden, layers, nh, nkv, vocab, seq, shared):
    hd = dim // nh
    f = lambda *s, sc=0.3, mean=0.0: (rng.standard_normal(s) * sc + mean).astype(F32).astype(F64)
    ly = [dict(attn_norm=f(dim, sc=0.2, mean=1), ffn_norm=f(dim, sc=0.2, mean=1),
               wq=f(dim, dim), wk=f(nkv * hd, dim), wv=f(nkv * hd, dim), wo=f(dim, dim),
               w1=f(hidden, dim), w2=f(dim, hidden), w3=f(hidden, dim)) for _ in range(layers)]
    return dict(dim=dim, hidden=hidden, n_heads=nh, n_kv_heads=nkv, head_dim=hd, vocab=vocab, seq=seq,
                eps=1e-5, theta=10000.0, rope_type=0, embed_scale=1.0, emb=f(vocab, dim, sc=1.0),
                layers=ly, out_norm=f(dim, sc=0.2, mean=1), wcls=None if shared else f(vocab, dim))


def f32bytes(a):
    return np.asarray(a, dtype="<f4").tobytes()


def write_llama2c(path, m, version):
    L, hd = len(m["layers"]), m["head_dim"]
    shared = m["wcls"] is None
    params = [m["dim"], m["hidden"], L, m["n_heads"], m["n_kv_heads"], m["vocab"], m["seq"]]
    lay = lambda key: b"".join(f32bytes(ly[key]) for ly in m["layers"])
    with open(path, "wb") as f:
        if version == 0:
            if not shared:
                params[5] = -params[5]
            f.write(struct.pack("<7i", *params))
            f.write(f32bytes(m["emb"]))
            for key in ("attn_norm", "wq", "wk", "wv", "wo", "ffn_norm", "w1", "w2", "w3"):
                f.write(lay(key))
            f.write(f32bytes(m["out_norm"]))
            f.write(f32bytes(np.full(m["seq"] * hd // 2, 7.0)))   # freq_cis_real (ignored)
            f.write(f32bytes(np.full(m["seq"] * hd // 2, -7.0)))  # freq_cis_imag (ignored)
        else:
            head = struct.pack("<Ii7iB", 0x616B3432, 1, *params, int(shared))
            f.write(head + b"\0" * (256 - len(head)))
            f.write(lay("attn_norm") + lay("ffn_norm") + f32bytes(m["out_norm"]) + f32bytes(m["emb"]))
            for key in ("wq", "wk", "wv", "wo", "w1", "w2", "w3"):
                f.write(lay(key))
        if not shared:
            f.write(f32bytes(m["wcls"]))


def load_llama2c_legacy(path):
    """numpy reader of a legacy llama2.c checkpoint (stories260K.bin)."""
    raw = open(path, "rb").read()
    dim, hidden, L, nh, nkv, vocab, seq = struct.unpack("<7i", raw[:28])
    shared = vocab > 0
    vocab = abs(vocab)
    hd = dim // nh
    a = np.frombuffer(raw, dtype="<f4", offset=28).astype(F64)
    pos = 0

    def take(*shape):
        nonlocal pos
        n = int(np.prod(shape))
        t = a[pos:pos + n].reshape(shape)
        pos += n
        return t
    emb = take(vocab, dim)
    per = {k: [take(*s) for _ in range(L)] for k, s in [
        ("attn_norm", (dim,)), ("wq", (dim, dim)), ("wk", (nkv * hd, dim)), ("wv", (nkv * hd, dim)),
        ("wo", (dim, dim)), ("ffn_norm", (dim,)), ("w1", (hidden, dim)), ("w2", (dim, hidden)),
        ("w3", (hidden, dim))]}
    out_norm = take(dim)
    take(seq * hd // 2)
    take(seq * hd // 2)
    wcls = None if shared else take(vocab, dim)
    assert pos == len(a), "stories260K layout"
    layers = [{k: per[k][l] for k in per} for l in range(L)]
    return dict(dim=dim, hidden=hidden, n_heads=nh, n_kv_heads=nkv, head_dim=hd, vocab=vocab, seq=seq,
                eps=1e-5, theta=10000.0, rope_type=0, embed_scale=1.0, emb=emb, layers=layers,
                out_norm=out_norm, wcls=wcls)


def qtensor(rng, rows, cols, wtype, scale_type):
    """Random Q8 (2) / Q4 (3) tensor: (dequantized float64, quant bytes, scale bytes)."""
    nb = rows * cols // 32
    d = rng.uniform(0.002, 0.02, nb)
    d = d.astype(F32) if scale_type == 0 else d.astype(np.float16)
    sbytes = d.astype("<f4" if scale_type == 0 else "<f2").tobytes()
    dd = np.repeat(d.astype(F64), 32).reshape(rows, cols)
    if wtype == 2:
        q = rng.integers(-127, 128, (rows, cols)).astype(np.int8)
        return q.astype(F64) * dd, q.tobytes(), sbytes
    nib = rng.integers(0, 16, (rows, cols)).astype(np.uint8)
    blk = nib.reshape(-1, 32)
    packed = (blk[:, :16] | (blk[:, 16:] << 4)).astype(np.uint8)  # byte j: j low, j+16 high
    return (nib.astype(F64) - 8) * dd, packed.tobytes(), sbytes


def make_mlb(path, rng, dim, hidden, layers, nh, nkv, hd, vocab, seq, wtype, scale_type, rope_type,
             tied, embed_scale, theta=10000.0, eps=1e-5):
    """Writes a random Llama .mlb per docs/format.md; returns the numpy model."""
    tensors = []  # (name, type, scale_type, rows, cols, data, scales)

    def q(name, rows, cols):
        w, data, sc = qtensor(rng, rows, cols, wtype, scale_type)
        tensors.append((name, wtype, scale_type, rows, cols, data, sc))
        return w

    def norm(name):
        w = (1 + 0.2 * rng.standard_normal(dim)).astype(F32)
        tensors.append((name, 0, 0, 1, dim, f32bytes(w), b""))
        return w.astype(F64)
    emb = q("tok_embd", vocab, dim)
    ly = []
    for l in range(layers):
        p = f"blk.{l}."
        ly.append(dict(attn_norm=norm(p + "attn_norm"), wq=q(p + "attn_q", nh * hd, dim),
                       wk=q(p + "attn_k", nkv * hd, dim), wv=q(p + "attn_v", nkv * hd, dim),
                       wo=q(p + "attn_output", dim, nh * hd), ffn_norm=norm(p + "ffn_norm"),
                       w1=q(p + "ffn_gate", hidden, dim), w3=q(p + "ffn_up", hidden, dim),
                       w2=q(p + "ffn_down", dim, hidden)))
    out_norm = norm("output_norm")
    wcls = None if tied else q("output", vocab, dim)
    rng.shuffle(tensors)  # directory order is free

    entries = []
    dir_off = 256
    pos = dir_off + 96 * len(tensors)
    align = lambda p: (p + 63) // 64 * 64
    for name, t, st, rows, cols, data, sc in tensors:
        doff = align(pos)
        entries.append([name, t, st, rows, cols, doff, len(data), 0, len(sc)])
        pos = doff + len(data)
        if sc:
            entries[-1][7] = align(pos)
            pos = entries[-1][7] + len(sc)
    size = pos
    buf = bytearray(size)
    for e, (name, t, st, rows, cols, data, sc) in zip(entries, tensors):
        buf[e[5]:e[5] + len(data)] = data
        if sc:
            buf[e[7]:e[7] + len(sc)] = sc
    for i, e in enumerate(entries):
        name = e[0].encode()
        buf[dir_off + 96 * i:dir_off + 96 * (i + 1)] = struct.pack(
            "<48sIIIIQQQQ", name, e[1], e[2], e[3], e[4], e[5], e[6], e[7], e[8])
    hdr = bytearray(256)
    hdr[0:8] = b"KRAFLMLB"
    struct.pack_into("<13I2f2I3f3If", hdr, 8, 1, 256, 0, dim, hidden, layers, nh, nkv, hd,
                     vocab, seq, wtype, scale_type, eps, theta, rope_type, 0, 1.0, 1.0, 1.0,
                     0, 8 if tied else 0, 0, embed_scale)
    struct.pack_into("<12I4Q", hdr, 104, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, hidden, len(tensors),
                     dir_off, 0, 0, size)
    buf[0:256] = hdr
    with open(path, "wb") as f:
        f.write(buf)
    return dict(dim=dim, hidden=hidden, n_heads=nh, n_kv_heads=nkv, head_dim=hd, vocab=vocab, seq=seq,
                eps=float(F32(eps)), theta=float(F32(theta)), rope_type=rope_type,
                embed_scale=float(F32(embed_scale)), emb=emb, layers=ly, out_norm=out_norm, wcls=wcls)


# ----------------------------------------------------------------------------------------------
# Running the tools.


class Ctx:
    def __init__(self, args, tmp):
        self.ref, self.cmp, self.shared, self.tmp = args.ref_forward, args.compare, args.shared, tmp

    def run_ref(self, *argv, expect=0):
        r = subprocess.run([self.ref, *map(str, argv)], capture_output=True, text=True)
        assert r.returncode == expect, f"ref_forward {argv}: exit {r.returncode}, expected {expect}\n{r.stderr}"
        return r

    def ref_logits(self, model_path, tokens, vocab, *extra):
        out = os.path.join(self.tmp, "logits.bin")
        self.run_ref(model_path, "--tokens", " ".join(map(str, tokens)), "--dump-logits", out, *extra)
        return np.fromfile(out, dtype="<f4").astype(F64).reshape(-1, vocab), out


def rel_err(a, b):
    return float((np.abs(a - b).max(axis=1) / np.abs(b).max(axis=1)).max())


def check_close(name, got, want, tol):
    """got: ref_forward's float32 dump; want: numpy's float64 logits. Passes iff every dumped
    value is within tol * (row's max |logit|) of want, beyond the float32 dump's own rounding
    (half a float32 ulp)."""
    assert got.shape == want.shape, f"{name}: shape {got.shape} vs {want.shape}"
    half_ulp = 0.5 * np.spacing(np.abs(want).astype(F32)).astype(F64)
    excess = np.maximum(np.abs(got - want) - half_ulp, 0.0)
    e = float((excess.max(axis=1) / np.abs(want).max(axis=1)).max())
    print(f"  {name}: max rel err beyond float32 rounding {e:.2e} (tol {tol:g});"
          f" vs float32(want) {rel_err(got, want.astype(F32).astype(F64)):.2e}")
    assert e <= tol, f"{name}: max relative error {e:.3e} > {tol:g}"


def case_llama2c_random(c):
    rng = np.random.default_rng(1234)
    tokens = [1, 5, 9, 2, 40, 40, 13, 7, 0, 66, 3, 21]
    for version, shared, nkv, hidden in [(0, False, 2, 72), (0, True, 4, 48), (1, True, 2, 40), (1, False, 1, 64)]:
        m = random_float_model(rng, 64, hidden, 2, 4, nkv, 67, 16, shared)
        path = os.path.join(c.tmp, f"l2c_v{version}.bin")
        write_llama2c(path, m, version)
        want = np_forward(m, tokens, quantized=False)
        got, _ = c.ref_logits(path, tokens, 67)
        check_close(f"llama2c v{version} shared={shared} n_kv={nkv}", got, want, TIGHT)
        ids = c.run_ref(path, "--tokens", "1 5", "-n", 6).stdout.split()
        assert list(map(int, ids)) == greedy(m, [1, 5], 6, False), f"greedy ids {ids}"
        # The emulated caches apply to a float checkpoint too; f16 and q8 move the logits
        # measurably (f32's rounding hides below the float32 dump's own).
        for kv in ("f32", "f16", "q8"):
            got, _ = c.ref_logits(path, tokens[:6], 67, "--kv", kv)
            check_close(f"  --kv {kv}", got, np_forward(m, tokens[:6], False, kv), TIGHT)
            assert kv == "f32" or rel_err(got, want[:6]) > 1e-6, f"--kv {kv} does not change the logits?"


def case_mlb_random(c):
    rng = np.random.default_rng(99)
    tokens = [1, 17, 4, 4, 33, 2, 48, 10, 0, 25]
    configs = [  # wtype, scale_type, rope_type, tied, embed_scale, n_kv, head_dim
        (2, 0, 0, False, 1.0, 2, 16),
        (3, 1, 1, True, 1.5, 1, 32),
        (2, 1, 0, True, 1.0, 4, 8),
        (3, 0, 0, False, 1.0, 2, 16),
    ]
    for wtype, st, rt, tied, es, nkv, hd in configs:
        path = os.path.join(c.tmp, "rand.mlb")
        nh = 64 // hd
        m = make_mlb(path, rng, 64, 96, 2, nh, nkv, hd, 50, 24, wtype, st, rt, tied, es)
        label = f"mlb {'Q8' if wtype == 2 else 'Q4'} scales={'f16' if st else 'f32'} rope={rt} tied={tied}"
        for kv in ("f32", "f16", "q8"):
            want = np_forward(m, tokens, quantized=True, kv=kv)
            got, _ = c.ref_logits(path, tokens, 50, "--kv", kv)
            check_close(f"{label} --kv {kv}", got, want, TIGHT)
        # Default cache for .mlb is f32; and the float (unquantized) math must differ measurably,
        # or the quantization emulation would be untested.
        got, _ = c.ref_logits(path, tokens, 50)
        check_close(f"{label} default kv", got, np_forward(m, tokens, True, "f32"), TIGHT)
        assert rel_err(got, np_forward(m, tokens, False, "f32")) > 1e-4, "activation quantization has no effect?"
        ids = c.run_ref(path, "--tokens", "1 17", "-n", 5).stdout.split()
        assert list(map(int, ids)) == greedy(m, [1, 17], 5, True, "f32"), f"greedy ids {ids}"


def case_stories260k(c):
    path = os.path.join(c.shared, "models", "stories260K.bin")
    expect = [1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338]
    ids = list(map(int, c.run_ref(path, "--tokens", "1", "-n", 16).stdout.split()))
    print(f"  greedy from BOS: {ids}")
    assert ids == expect, f"greedy ids {ids}, expected {expect} (models/SOURCES.md)"
    m = load_llama2c_legacy(path)
    tokens = expect[:12]
    got, _ = c.ref_logits(path, tokens, 512)
    check_close("stories260K logits vs numpy", got, np_forward(m, tokens, False), TIGHT)


def case_errors(c):
    rng = np.random.default_rng(5)
    good = os.path.join(c.tmp, "good.mlb")
    make_mlb(good, rng, 32, 32, 1, 2, 1, 16, 10, 8, 2, 0, 0, False, 1.0)
    raw = open(good, "rb").read()
    out = os.path.join(c.tmp, "o.bin")

    def bad_file(name, data, expect_in_msg, code=2):
        p = os.path.join(c.tmp, name)
        open(p, "wb").write(data)
        r = c.run_ref(p, "--tokens", "1", "--dump-logits", out, expect=code)
        assert expect_in_msg in r.stderr, f"{name}: stderr {r.stderr!r} lacks {expect_in_msg!r}"
        print(f"  {name}: exit {code}: {r.stderr.strip()}")

    def patched(off, fmt, val):
        b = bytearray(raw)
        struct.pack_into(fmt, b, off, val)
        return bytes(b)
    c.run_ref(good, "--tokens", "1 2 3", "--dump-logits", out)
    assert os.path.getsize(out) == 3 * 10 * 4
    bad_file("truncated.mlb", raw[:-10], "file_size")
    bad_file("short.mlb", raw[:100], "truncated")
    bad_file("version.mlb", patched(8, "<I", 3), "version")
    bad_file("wtype.mlb", patched(52, "<I", 7), "wtype")
    bad_file("arch.mlb", patched(16, "<I", 5), "arch")
    bad_file("dim.mlb", patched(20, "<I", 48), "dim")
    bad_file("dir.mlb", patched(152, "<Q", 1 << 40), "directory")
    bad_file("name.mlb", patched(256, "<4s", b"xxxx"), "missing")
    bad_file("magic.bin", b"KRAFLMLX" + raw[8:], "out of range")  # not .mlb: read as llama2.c
    bad_file("empty.bin", b"", "truncated")
    l2c = os.path.join(c.tmp, "l2c.bin")
    write_llama2c(l2c, random_float_model(rng, 32, 32, 1, 2, 2, 11, 8, False), 0)
    bad_file("l2c_trunc.bin", open(l2c, "rb").read()[:-4], "truncated")
    bad_file("l2c_long.bin", open(l2c, "rb").read() + b"\0" * 4, "bytes")
    c.run_ref(os.path.join(c.tmp, "nonexistent.mlb"), "--tokens", "1", "-n", 1, expect=1)
    c.run_ref(good, "--tokens", "1", "--dump-logits", os.path.join(c.tmp, "no", "dir", "x"), expect=1)
    for argv in (["--tokens", "1 x", "-n", 1], ["--tokens", "1 10", "-n", 1], ["--tokens", "", "-n", 1],
                 ["--tokens", "1", "--kv", "q4", "-n", 1], ["--tokens", "1", "-n", "5x"],
                 ["--tokens", "1", "-n", "-1"], ["--tokens", "1 2 3 4 5 6 7 8 9", "-n", 1],
                 ["--tokens", "1 2 3", "-n", 7], ["--tokens", "1"], ["-n", 1]):
        c.run_ref(good, *argv, expect=2)
    c.run_ref(good, "--tokens", "1 2 3", "-n", 6)  # 8 positions = max_seq: allowed
    c.run_ref("--help", expect=0)


def case_compare_logits(c):
    rng = np.random.default_rng(7)
    V, R = 100, 6
    b = rng.standard_normal((R, V)) * 3
    b[:, 7] += 20  # a clear argmax
    pa, pb = os.path.join(c.tmp, "a.bin"), os.path.join(c.tmp, "b.bin")
    b.astype("<f4").tofile(pb)

    def cmp(a, *opts, expect, vocab=V):
        np.asarray(a).astype("<f4").tofile(pa)
        r = subprocess.run([sys.executable, c.cmp, pa, pb, "--vocab", str(vocab), *opts],
                           capture_output=True, text=True)
        assert r.returncode == expect, f"compare {opts}: exit {r.returncode}, expected {expect}\n{r.stdout}{r.stderr}"
        line = r.stdout.strip()
        assert expect == 2 or len(line.splitlines()) == 1, f"one summary line expected: {r.stdout!r}"
        return line
    bf = b.astype(F32).astype(F64)
    line = cmp(b, expect=0)
    assert "PASS" in line and "max_rel_err=0.000e+00" in line and f"argmax_agree={R}/{R}" in line, line
    a = bf.copy()
    a[2, 50] += 5e-3 * np.abs(bf[2]).max()  # 5e-3 relative in row 2
    line = cmp(a, expect=1)
    assert "max_rel_err=5.0" in line and "(row 2)" in line, line
    cmp(a, "--rtol", "1e-2", expect=0)
    near = bf.copy()
    near[:, 8] = near[:, 7] - 1e-3  # a near-tie at ids 7/8
    np.asarray(near).astype("<f4").tofile(pb)
    swapped = near.copy()
    swapped[3, 8] = near[3, 7] + 1e-3  # argmax flips in row 3, tiny relative change
    line = cmp(swapped, expect=1)
    assert f"argmax_agree={R - 1}/{R}" in line, line
    cmp(swapped, "--any-argmax", expect=0)
    cmp(swapped, "--kl", "1e-2", expect=1)
    cmp(swapped, "--kl", "1e-2", "--any-argmax", expect=0)
    b.astype("<f4").tofile(pb)
    # KL mode: a small smooth perturbation passes, a large one fails on KL, a top-5 change fails.
    cmp(bf + rng.standard_normal((R, V)) * 0.01, "--kl", "1e-2", expect=0)
    cmp(bf + rng.standard_normal((R, V)) * 3, "--kl", "1e-2", expect=1)
    top = bf.copy()
    order = np.argsort(-bf[1])
    top[1, order[1:4]] -= 30  # ids 2..4 of B's top 5 fall out of A's
    line = cmp(top, "--kl", "10", expect=1)
    assert "top5_min=2/5" in line, line
    # KL value: check against a direct computation.
    a = bf + rng.standard_normal((R, V)) * 0.3
    af = a.astype(F32).astype(F64)
    p = np.exp(bf - bf.max(1, keepdims=True)); p /= p.sum(1, keepdims=True)
    q = np.exp(af - af.max(1, keepdims=True)); q /= q.sum(1, keepdims=True)
    kl = (p * np.log(p / q)).sum(1).max()
    line = cmp(a, "--kl", "1", expect=0)
    got = float(line.split("kl_max=")[1].split()[0])
    assert abs(got - kl) <= 1e-3 * kl + 1e-12, f"kl_max {got} vs {kl}"
    nan = bf.copy()
    nan[0, 0] = np.nan
    cmp(nan, expect=1)
    cmp(b[:3], expect=2)                # fewer rows
    cmp(b.ravel()[:-1], expect=2)        # not a whole row
    cmp(b, expect=2, vocab=0)
    r = subprocess.run([sys.executable, c.cmp, pa, os.path.join(c.tmp, "missing.bin"), "--vocab", "5"],
                       capture_output=True, text=True)
    assert r.returncode == 2, r
    r = subprocess.run([sys.executable, c.cmp, pa], capture_output=True, text=True)
    assert r.returncode == 2, r


CASES = {"llama2c_random": case_llama2c_random, "mlb_random": case_mlb_random,
         "stories260k": case_stories260k, "errors": case_errors, "compare_logits": case_compare_logits}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ref-forward", required=True)
    p.add_argument("--compare", required=True)
    p.add_argument("--shared", default=os.environ.get("KRAFLA_SHARED", "../shared"))
    p.add_argument("case", choices=sorted(CASES))
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="ref_forward_test_") as tmp:
        CASES[args.case](Ctx(args, tmp))
    print(f"PASS {args.case}")


if __name__ == "__main__":
    main()
