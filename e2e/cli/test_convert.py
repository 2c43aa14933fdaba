#!/usr/bin/env python3
"""End-to-end checks of ml_convert (docs/user-guide.md, "ml_convert").

usage: test_convert.py BIN_DIR SHARED_DIR

Reads every output with its own .mlb reader (written from docs/format.md, sharing nothing with
the C++ code) and checks it against an independent re-implementation of the quantization rule
(docs/format.md, "Block encodings"; float32 arithmetic emulated by rounding through
array('f')), so the quants and scales of stories260K must match byte for byte. Also checks
llama2.c version 1 and separate-classifier checkpoints, random models of several shapes,
determinism, and the exit codes and messages for bad input. Python 3 standard library only.
"""
import array
import math
import os
import struct
import subprocess
import sys
import tempfile

FAILURES = []
CHECKS = [0]


def check(cond, what):
    CHECKS[0] += 1
    if not cond:
        FAILURES.append(what)
        print("FAIL:", what)
    return cond


def f32(values):
    """Rounds a list of Python floats (doubles) to float32, element by element."""
    return array.array("f", values).tolist()


# --- an independent .mlb reader -----------------------------------------------------------------

HEADER_U32 = {  # offset: field (docs/format.md, "Header")
    8: "version", 12: "header_size", 16: "arch", 20: "dim", 24: "hidden_dim", 28: "n_layers", 32: "n_heads",
    36: "n_kv_heads", 40: "head_dim", 44: "vocab_size", 48: "max_seq", 52: "wtype", 56: "scale_type",
    68: "rope_type", 72: "rope_scaling", 88: "rope_orig_max_seq", 92: "flags", 96: "activation",
    104: "sliding_window", 108: "sliding_pattern", 112: "linear_period", 116: "linear_k_heads",
    120: "linear_v_heads", 124: "linear_k_dim", 128: "linear_v_dim", 132: "linear_conv", 136: "bos_id",
    140: "eos_id", 144: "hidden_dim_orig", 148: "n_tensors", 188: "n_rot"}
HEADER_F32 = {60: "norm_eps", 64: "rope_theta", 76: "rope_factor", 80: "rope_low_freq_factor",
              84: "rope_high_freq_factor", 100: "embed_scale", 184: "rope_local_theta", 192: "attn_scale",
              196: "logit_softcap"}
HEADER_U64 = {152: "dir_offset", 160: "tokenizer_offset", 168: "tokenizer_size", 176: "file_size"}


class Mlb:
    def __init__(self, path):
        with open(path, "rb") as f:
            self.b = f.read()
        b = self.b
        if len(b) < 256 or b[:8] != b"KRAFLMLB":
            raise ValueError("%s: not a .mlb file" % path)
        self.h = {}
        for off, name in HEADER_U32.items():
            self.h[name] = struct.unpack_from("<I", b, off)[0]
        for off, name in HEADER_F32.items():
            self.h[name] = struct.unpack_from("<f", b, off)[0]
        for off, name in HEADER_U64.items():
            self.h[name] = struct.unpack_from("<Q", b, off)[0]
        self.reserved_zero = b[200:256] == bytes(56)  # version 2: the fields end at 200
        self.tensors = []
        for i in range(self.h["n_tensors"]):
            e = self.h["dir_offset"] + 96 * i
            raw = b[e:e + 48]
            t = dict(zip(("type", "scale_type", "rows", "cols", "data_offset", "data_size", "scale_offset",
                          "scale_size"), struct.unpack_from("<IIIIQQQQ", b, e + 48)))
            t["name"] = raw.split(b"\0", 1)[0].decode()
            t["name_ok"] = b"\0" in raw and raw[len(t["name"]):] == bytes(48 - len(t["name"]))
            self.tensors.append(t)
        self.by_name = {t["name"]: t for t in self.tensors}

    def data(self, t):
        return self.b[t["data_offset"]:t["data_offset"] + t["data_size"]]

    def scales(self, t):
        return self.b[t["scale_offset"]:t["scale_offset"] + t["scale_size"]]

    def tokenizer(self):
        o = self.h["tokenizer_offset"]
        if o == 0:
            return None
        kind, reserved = struct.unpack_from("<II", self.b, o)
        return kind, reserved, self.b[o + 8:o + self.h["tokenizer_size"]]

    def dequant(self, t):
        """The tensor as a flat list of floats."""
        d = self.data(t)
        if t["type"] == 0:
            return list(struct.unpack("<%df" % (t["rows"] * t["cols"]), d))
        nb = t["rows"] * t["cols"] // 32
        s = list(struct.unpack("<%d%s" % (nb, "f" if t["scale_type"] == 0 else "e"), self.scales(t)))
        out = []
        for blk in range(nb):
            if t["type"] == 2:
                q = struct.unpack_from("32b", d, blk * 32)
            else:
                by = d[blk * 16:blk * 16 + 16]
                q = [(x & 15) - 8 for x in by] + [(x >> 4) - 8 for x in by]
            out.extend(v * s[blk] for v in q)
        return out

    def layout_problems(self):
        """Everything docs/format.md requires of the layout, as a list of messages."""
        h, p = self.h, []
        if h["version"] != 2 or h["header_size"] != 256:
            p.append("version/header_size")
        if not self.reserved_zero:
            p.append("reserved header bytes not zero")
        if h["dir_offset"] != 256:
            p.append("dir_offset %d" % h["dir_offset"])
        if h["file_size"] != len(self.b):
            p.append("file_size %d != %d" % (h["file_size"], len(self.b)))
        spans = [(0, 256 + 96 * h["n_tensors"], "header+directory")]
        for t in self.tensors:
            n = t["rows"] * t["cols"]
            quant = t["type"] in (2, 3)
            want = {0: 4 * n, 1: 2 * n, 2: n, 3: n // 2}[t["type"]]
            if not t["name_ok"]:
                p.append("%s: name not NUL-padded" % t["name"])
            if t["data_size"] != want or t["data_offset"] % 64:
                p.append("%s: data size/alignment" % t["name"])
            spans.append((t["data_offset"], t["data_offset"] + t["data_size"], t["name"]))
            if quant:
                if t["cols"] % 32 or t["scale_type"] != h["scale_type"] or t["scale_offset"] % 64 or \
                        t["scale_size"] != n // 32 * (4 if h["scale_type"] == 0 else 2):
                    p.append("%s: scale fields" % t["name"])
                spans.append((t["scale_offset"], t["scale_offset"] + t["scale_size"], t["name"] + " scales"))
            elif t["scale_type"] or t["scale_offset"] or t["scale_size"]:
                p.append("%s: scale fields on an unquantized tensor" % t["name"])
        if h["tokenizer_offset"]:
            spans.append((h["tokenizer_offset"], h["tokenizer_offset"] + h["tokenizer_size"], "tokenizer"))
            if h["tokenizer_offset"] + h["tokenizer_size"] != len(self.b):
                p.append("tokenizer section is not last")
        elif h["tokenizer_size"]:
            p.append("tokenizer_size without offset")
        spans.sort()
        for (a0, a1, an), (b0, b1, bn) in zip(spans, spans[1:]):
            if b0 < a1:
                p.append("%s overlaps %s" % (an, bn))
        if spans[-1][1] > len(self.b):
            p.append("an array runs past the end")
        return p


# --- the quantization rule, independently (docs/format.md and src/core/quant_ref.h) ------------

def quant_q8(x):
    """Q8 quants (bytes) and float scales of a flat float32 list whose length is a multiple of 32."""
    qs, ds = bytearray(), []
    for b in range(0, len(x), 32):
        blk = x[b:b + 32]
        amax = max(abs(v) for v in blk)
        if amax < 1e-30:
            qs.extend(bytes(32))
            ds.append(0.0)
            continue
        d, inv = f32([amax / 127.0, 127.0 / amax])
        prod = f32([v * inv for v in blk])
        r = f32([p + math.copysign(0.5, v) for p, v in zip(prod, blk)])
        qs.extend(struct.pack("32b", *[max(-127, min(127, int(v))) for v in r]))
        ds.append(d)
    return bytes(qs), ds


def quant_q4(x):
    """Q4 quants (bytes, GGUF nibble order) and float scales (GGUF's Q4_0 rule)."""
    qs, ds = bytearray(), []
    for b in range(0, len(x), 32):
        blk = x[b:b + 32]
        m, amax = 0.0, 0.0
        for v in blk:
            if abs(v) > amax:
                amax, m = abs(v), v
        d = f32([m / -8.0])[0]
        inv = f32([1.0 / d])[0] if d != 0.0 else 0.0
        r = f32([p + 8.5 for p in f32([v * inv for v in blk])])
        nib = [max(0, min(15, int(v))) for v in r]
        qs.extend(nib[j] | (nib[j + 16] << 4) for j in range(16))
        ds.append(d)
    return bytes(qs), ds


def expected_arrays(x, rows, cols, wtype, scales):
    """The quants and scale bytes ml_convert must write for a rows x cols float32 matrix."""
    assert len(x) == rows * cols
    q, d = (quant_q8 if wtype == "q8" else quant_q4)(x)
    return q, struct.pack("<%d%s" % (len(d), "f" if scales == "f32" else "e"), *d)


def pad(x, rows, cols, prows, pcols):
    """Zero-pads a rows x cols matrix to prows x pcols."""
    out = []
    for r in range(prows):
        out.extend((x[r * cols:(r + 1) * cols] if r < rows else [0.0] * cols) + [0.0] * (pcols - cols))
    return out


# --- llama2.c checkpoints ---------------------------------------------------------------------

def read_legacy(path):
    """(params, tensors) of a legacy llama2.c checkpoint, tensors as lists of floats."""
    with open(path, "rb") as f:
        b = f.read()
    dim, hidden, L, heads, kv, vocab, seq = struct.unpack_from("<7i", b, 0)
    shared = vocab > 0
    vocab = abs(vocab)
    hs = dim // heads
    kv_dim = kv * hs
    fl = array.array("f", b[28:]).tolist()
    pos = [0]

    def take(n):
        v = fl[pos[0]:pos[0] + n]
        pos[0] += n
        return v

    t = {"emb": take(vocab * dim)}
    for name, n in (("rms_att", dim), ("wq", dim * dim), ("wk", kv_dim * dim), ("wv", kv_dim * dim),
                    ("wo", dim * dim), ("rms_ffn", dim), ("w1", hidden * dim), ("w2", dim * hidden),
                    ("w3", hidden * dim)):
        t[name] = [take(n) for _ in range(L)]
    t["rms_final"] = take(dim)
    t["freq"] = take(seq * hs)
    if not shared:
        t["wcls"] = take(vocab * dim)
    assert pos[0] == len(fl), "stories260K.bin does not parse as a legacy checkpoint"
    p = dict(dim=dim, hidden=hidden, layers=L, heads=heads, kv_heads=kv, vocab=vocab, seq=seq, shared=shared)
    return p, t


def pack_floats(v):
    return array.array("f", v).tobytes()


def write_legacy(path, p, t, shared):
    with open(path, "wb") as f:
        f.write(struct.pack("<7i", p["dim"], p["hidden"], p["layers"], p["heads"], p["kv_heads"],
                            p["vocab"] if shared else -p["vocab"], p["seq"]))
        f.write(pack_floats(t["emb"]))
        for name in ("rms_att", "wq", "wk", "wv", "wo", "rms_ffn", "w1", "w2", "w3"):
            for layer in t[name]:
                f.write(pack_floats(layer))
        f.write(pack_floats(t["rms_final"]) + pack_floats(t["freq"]))
        if not shared:
            f.write(pack_floats(t["wcls"]))


def write_v1(path, p, t, shared, version=1):
    """llama2.c export.py version1_export's layout."""
    head = struct.pack("<Ii7iB", 0x616B3432, version, p["dim"], p["hidden"], p["layers"], p["heads"],
                       p["kv_heads"], p["vocab"], p["seq"], 1 if shared else 0)
    with open(path, "wb") as f:
        f.write(head + bytes(256 - len(head)))
        for name in ("rms_att", "rms_ffn"):
            for layer in t[name]:
                f.write(pack_floats(layer))
        f.write(pack_floats(t["rms_final"]) + pack_floats(t["emb"]))
        for name in ("wq", "wk", "wv", "wo", "w1", "w2", "w3"):
            for layer in t[name]:
                f.write(pack_floats(layer))
        if not shared:
            f.write(pack_floats(t["wcls"]))


# --- the tests --------------------------------------------------------------------------------

class Ctx:
    def __init__(self, bin_dir, shared, work):
        self.exe = os.path.join(bin_dir, "ml_convert")
        self.shared = shared
        self.work = work
        self.ckpt = os.path.join(shared, "models", "stories260K.bin")
        self.tok = os.path.join(shared, "models", "tok512.bin")
        self.big_tok = os.path.join(shared, "models", "tokenizer.bin")

    def path(self, name):
        return os.path.join(self.work, name)

    def run(self, *args):
        p = subprocess.run([self.exe] + [str(a) for a in args], capture_output=True, text=True, timeout=600)
        return p.returncode, p.stdout, p.stderr

    def expect_fail(self, code, needle, *args):
        """Runs ml_convert expecting exit code `code` and `needle` in its ml_convert:-prefixed message."""
        rc, _, err = self.run(*args)
        what = "ml_convert %s" % " ".join(os.path.basename(str(a)) for a in args)
        check(rc == code, "%s: exit %d, expected %d (stderr: %s)" % (what, rc, code, err.strip()))
        check(err.startswith("ml_convert: "), "%s: stderr not prefixed 'ml_convert: ': %r" % (what, err))
        check(needle in err, "%s: stderr lacks %r: %r" % (what, needle, err))
        return err


def check_stories(c, m, p, t, wtype, scales, tag, separate_cls=False):
    """An .mlb converted from stories260K (or a variant): header and every array byte for byte."""
    h = m.h
    check(m.layout_problems() == [], "%s: layout: %s" % (tag, m.layout_problems()))
    hidden_p = (p["hidden"] + 31) // 32 * 32
    want = dict(arch=0, dim=p["dim"], hidden_dim=hidden_p, hidden_dim_orig=p["hidden"], n_layers=p["layers"],
                n_heads=p["heads"], n_kv_heads=p["kv_heads"], head_dim=p["dim"] // p["heads"],
                vocab_size=p["vocab"], max_seq=p["seq"], wtype=2 if wtype == "q8" else 3,
                scale_type=0 if scales == "f32" else 1, rope_type=0, rope_scaling=0, activation=0, bos_id=1,
                eos_id=2, flags=0 if separate_cls else 8, sliding_window=0, linear_period=0,
                n_tensors=2 + 9 * p["layers"] + (1 if separate_cls else 0))
    for k, v in want.items():
        check(h[k] == v, "%s: header %s = %s, expected %s" % (tag, k, h[k], v))
    check(abs(h["norm_eps"] - 1e-5) < 1e-12 and h["rope_theta"] == 10000.0 and h["embed_scale"] == 1.0
          and h["rope_factor"] == 1.0, "%s: norm_eps/rope_theta/embed_scale/rope_factor" % tag)
    tok = m.tokenizer()
    with open(c.tok, "rb") as f:
        tok_bytes = f.read()
    check(tok is not None and tok[0] == 1 and tok[1] == 0 and tok[2] == tok_bytes,
          "%s: tokenizer section is not kind 1 + tok512.bin verbatim" % tag)

    dim, hid, kv_dim = p["dim"], p["hidden"], p["kv_heads"] * (p["dim"] // p["heads"])
    names = ["tok_embd"]
    mats = {"tok_embd": (t["emb"], p["vocab"], dim, p["vocab"], dim)}
    norms = {"output_norm": t["rms_final"]}
    for l in range(p["layers"]):
        b = "blk.%d." % l
        names += [b + s for s in ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm",
                                  "ffn_gate", "ffn_up", "ffn_down")]
        norms[b + "attn_norm"] = t["rms_att"][l]
        norms[b + "ffn_norm"] = t["rms_ffn"][l]
        mats[b + "attn_q"] = (t["wq"][l], dim, dim, dim, dim)
        mats[b + "attn_k"] = (t["wk"][l], kv_dim, dim, kv_dim, dim)
        mats[b + "attn_v"] = (t["wv"][l], kv_dim, dim, kv_dim, dim)
        mats[b + "attn_output"] = (t["wo"][l], dim, dim, dim, dim)
        mats[b + "ffn_gate"] = (t["w1"][l], hid, dim, hidden_p, dim)
        mats[b + "ffn_up"] = (t["w3"][l], hid, dim, hidden_p, dim)
        mats[b + "ffn_down"] = (t["w2"][l], dim, hid, dim, hidden_p)
    names.append("output_norm")
    if separate_cls:
        names.append("output")
        mats["output"] = (t["wcls"], p["vocab"], dim, p["vocab"], dim)
    check([x["name"] for x in m.tensors] == names, "%s: tensor names/order %s" % (tag, [x["name"] for x in m.tensors]))
    for name in names:
        e = m.by_name.get(name)
        if e is None:
            continue
        if name in norms:
            check(e["type"] == 0 and (e["rows"], e["cols"]) == (1, dim) and m.data(e) == pack_floats(norms[name]),
                  "%s: %s is not the checkpoint's F32 1x%d" % (tag, name, dim))
            continue
        x, rows, cols, prows, pcols = mats[name]
        check((e["type"], e["rows"], e["cols"]) == (want["wtype"], prows, pcols),
              "%s: %s type/shape %s" % (tag, name, (e["type"], e["rows"], e["cols"])))
        q, s = expected_arrays(pad(x, rows, cols, prows, pcols), prows, pcols, wtype, scales)
        check(m.data(e) == q, "%s: %s quants differ from the reference rule" % (tag, name))
        check(m.scales(e) == s, "%s: %s scales differ from the reference rule" % (tag, name))


def test_stories(c):
    p, t = read_legacy(c.ckpt)
    check((p["dim"], p["hidden"], p["shared"]) == (64, 172, True), "stories260K.bin header %s" % p)
    outs = {}
    for wtype in ("q8", "q4"):
        for scales in ("f32", "f16"):
            out = c.path("s_%s_%s.mlb" % (wtype, scales))
            rc, _, err = c.run("llama2c", c.ckpt, "--tokenizer", c.tok, "-o", out, "--wtype", wtype, "--scales", scales)
            if not check(rc == 0, "llama2c %s/%s: exit %d: %s" % (wtype, scales, rc, err)):
                continue
            m = Mlb(out)
            check_stories(c, m, p, t, wtype, scales, "stories260K %s/%s" % (wtype, scales))
            outs[(wtype, scales)] = out
            # Dequantized weights stay close to the checkpoint (a sanity bound on top of the exact check).
            e = m.by_name["blk.0.attn_q"]
            err_max = max(abs(a - b) for a, b in zip(m.dequant(e), t["wq"][0]))
            amax = max(abs(v) for v in t["wq"][0])
            check(err_max <= 1.01 * amax / (8 if wtype == "q4" else 127), "%s/%s: dequantized attn_q error %g" % (
                wtype, scales, err_max))
            e = m.by_name["blk.0.ffn_down"]
            deq = m.dequant(e)
            check(all(deq[r * 192 + j] == 0.0 for r in range(64) for j in range(172, 192)),
                  "%s/%s: ffn_down padding columns are not zero" % (wtype, scales))
    # Default options are q8/f32.
    out = c.path("s_default.mlb")
    rc, _, _ = c.run("llama2c", c.ckpt, "--tokenizer", c.tok, "-o", out)
    if ("q8", "f32") in outs and check(rc == 0, "llama2c with default options"):
        check(open(out, "rb").read() == open(outs[("q8", "f32")], "rb").read(), "defaults differ from q8/f32")

    # The same model as a version 1 checkpoint gives the same file, byte for byte.
    v1 = c.path("s_v1.bin")
    write_v1(v1, p, t, shared=True)
    out = c.path("s_v1.mlb")
    rc, _, err = c.run("llama2c", v1, "--tokenizer", c.tok, "-o", out, "--wtype", "q4")
    if check(rc == 0, "version 1 checkpoint: exit %d: %s" % (rc, err)) and ("q4", "f32") in outs:
        check(open(out, "rb").read() == open(outs[("q4", "f32")], "rb").read(),
              "version 1 conversion differs from the legacy one")

    # Separate classifiers (legacy: negative vocab_size; version 1: shared_classifier 0).
    t2 = dict(t)
    t2["wcls"] = [v * 0.5 + 0.01 for v in t["emb"]]
    t2["wcls"] = f32(t2["wcls"])
    for kind in ("legacy", "v1"):
        path = c.path("s_cls_%s.bin" % kind)
        (write_legacy if kind == "legacy" else write_v1)(path, p, t2, shared=False)
        out = c.path("s_cls_%s.mlb" % kind)
        rc, _, err = c.run("llama2c", path, "--tokenizer", c.tok, "-o", out, "--scales", "f16")
        if check(rc == 0, "%s separate classifier: exit %d: %s" % (kind, rc, err)):
            check_stories(c, Mlb(out), p, t2, "q8", "f16", "%s separate classifier" % kind, separate_cls=True)
    return p, t


def test_llama2c_errors(c, p, t):
    with open(c.ckpt, "rb") as f:
        raw = f.read()
    out = c.path("bad.mlb")
    c.expect_fail(1, "nonexistent.bin", "llama2c", c.path("nonexistent.bin"), "--tokenizer", c.tok, "-o", out)
    c.expect_fail(1, "no_tok.bin", "llama2c", c.ckpt, "--tokenizer", c.path("no_tok.bin"), "-o", out)

    def bad(name, data, needle, code=2):
        path = c.path(name)
        with open(path, "wb") as f:
            f.write(data)
        c.expect_fail(code, needle, "llama2c", path, "--tokenizer", c.tok, "-o", out)

    bad("truncated.bin", raw[:-4], "implies %d bytes" % len(raw))
    bad("padded.bin", raw + bytes(4), "%d bytes" % (len(raw) + 4))
    bad("tiny.bin", raw[:20], "too short")
    bad("empty.bin", b"", "too short")
    hdr = list(struct.unpack_from("<7i", raw))
    # dim 48 with consistent sizes (so only the multiple-of-32 rule can reject it).
    q = dict(p, dim=48, heads=6, kv_heads=3, hidden=64, layers=1, vocab=8, seq=4)
    hs, kvd = 8, 24
    n = q["vocab"] * 48 + 48 + 48 * 48 + 2 * kvd * 48 + 48 * 48 + 48 + 3 * 64 * 48 + 48 + q["seq"] * hs
    bad("dim48.bin", struct.pack("<7i", 48, 64, 1, 6, 3, 8, 4) + bytes(4 * n), "dim 48")
    for i, field in ((3, "n_heads"), (5, "vocab_size"), (6, "seq_len")):
        h2 = list(hdr)
        h2[i] = 0
        bad("zero_%s.bin" % field, struct.pack("<7i", *h2) + raw[28:], field)
    h2 = list(hdr)
    h2[4] = 3  # 8 heads, 3 kv heads
    bad("kv3.bin", struct.pack("<7i", *h2) + raw[28:], "n_kv_heads 3")
    bad("v2.bin", struct.pack("<Ii", 0x616B3432, 2) + bytes(248), "version 2")
    # A tokenizer whose vocabulary is not vocab_size (tokenizer.bin has 32000 tokens).
    c.expect_fail(2, "vocab_size 512", "llama2c", c.ckpt, "--tokenizer", c.big_tok, "-o", out)
    with open(c.tok, "rb") as f:
        tok = f.read()
    tpath = c.path("tok_truncated.bin")
    with open(tpath, "wb") as f:
        f.write(tok[:-3])
    c.expect_fail(2, "tok_truncated.bin", "llama2c", c.ckpt, "--tokenizer", tpath, "-o", out)
    check(not os.path.exists(out), "a failed conversion left %s behind" % out)
    # Usage errors.
    c.expect_fail(2, "--wtype", "llama2c", c.ckpt, "--tokenizer", c.tok, "-o", out, "--wtype", "q5")
    c.expect_fail(2, "--scales", "llama2c", c.ckpt, "--tokenizer", c.tok, "-o", out, "--scales", "bf16")
    c.expect_fail(2, "output", "llama2c", c.ckpt, "--tokenizer", c.tok)
    c.expect_fail(2, "tokenizer", "llama2c", c.ckpt, "-o", out)
    c.expect_fail(2, "", "frobnicate")
    c.expect_fail(2, "")
    # An output folder that does not exist: an I/O error naming the path, nothing left behind.
    missing = c.path("no_such_dir/out.mlb")
    c.expect_fail(1, missing, "llama2c", c.ckpt, "--tokenizer", c.tok, "-o", missing)
    check(not any(".tmp." in x for x in os.listdir(c.work)), "a temporary file was left behind")
    for args in (("--help",), ("llama2c", "--help"), ("random", "--help")):
        rc, so, _ = c.run(*args)
        check(rc == 0 and "Usage" in so, "ml_convert %s: exit %d" % (" ".join(args), rc))


RANDOM_SHAPES = [
    # dim hidden layers heads kv vocab seq extra
    (64, 96, 2, 4, 2, 100, 16, []),
    (128, 256, 3, 4, 2, 256, 160, ["--wtype", "q4"]),
    (96, 64, 1, 3, 1, 37, 8, ["--scales", "f16", "--tied"]),
    (64, 128, 2, 4, 4, 50, 32, ["--head-dim", "8", "--rope-type", "half", "--rope-theta", "500000"]),
    (32, 32, 1, 1, 1, 3, 1, ["--wtype", "q4", "--scales", "f16"]),
    (64, 64, 1, 2, 1, 512, 16, ["--tokenizer", "TOK"]),
]


def random_args(c, shape, out, seed=1):
    dim, hid, L, heads, kv, vocab, seq, extra = shape
    extra = [c.tok if a == "TOK" else a for a in extra]
    return ["random", "--dim", dim, "--hidden", hid, "--layers", L, "--heads", heads, "--kv-heads", kv, "--vocab",
            vocab, "--max-seq", seq, "--seed", seed, "-o", out] + extra


def test_random(c):
    for i, shape in enumerate(RANDOM_SHAPES):
        dim, hid, L, heads, kv, vocab, seq, extra = shape
        out = c.path("r%d.mlb" % i)
        rc, _, err = c.run(*random_args(c, shape, out))
        if not check(rc == 0, "random %s: exit %d: %s" % (shape, rc, err)):
            continue
        m = Mlb(out)
        h = m.h
        tag = "random %s" % (shape,)
        check(m.layout_problems() == [], "%s: layout %s" % (tag, m.layout_problems()))
        hd = int(extra[extra.index("--head-dim") + 1]) if "--head-dim" in extra else dim // heads
        tied = "--tied" in extra
        want = dict(dim=dim, hidden_dim=hid, hidden_dim_orig=hid, n_layers=L, n_heads=heads, n_kv_heads=kv,
                    head_dim=hd, vocab_size=vocab, max_seq=seq, wtype=3 if "q4" in extra else 2,
                    scale_type=1 if "f16" in extra else 0, rope_type=1 if "half" in extra else 0,
                    flags=8 if tied else 0, bos_id=1, eos_id=2, n_tensors=2 + 9 * L + (0 if tied else 1))
        for k, v in want.items():
            check(h[k] == v, "%s: header %s = %s, expected %s" % (tag, k, h[k], v))
        check(h["rope_theta"] == (500000.0 if "500000" in extra else 10000.0), "%s: rope_theta" % tag)
        shapes = {"tok_embd": (vocab, dim), "output_norm": (1, dim)}
        if not tied:
            shapes["output"] = (vocab, dim)
        for l in range(L):
            b = "blk.%d." % l
            shapes.update({b + "attn_norm": (1, dim), b + "ffn_norm": (1, dim), b + "attn_q": (heads * hd, dim),
                           b + "attn_k": (kv * hd, dim), b + "attn_v": (kv * hd, dim),
                           b + "attn_output": (dim, heads * hd), b + "ffn_gate": (hid, dim),
                           b + "ffn_up": (hid, dim), b + "ffn_down": (dim, hid)})
        got = {x["name"]: (x["rows"], x["cols"]) for x in m.tensors}
        check(got == shapes, "%s: tensors %s" % (tag, got))
        # Values: O(1) activations need matrices ~U(-1,1)/sqrt(cols) and norms around 1.
        for x in m.tensors:
            v = m.dequant(x)
            spread = max(v) - min(v)
            if x["type"] == 0:
                check(min(v) >= 0.79 and max(v) <= 1.21 and spread > 0.1, "%s: %s norm values" % (tag, x["name"]))
            else:
                bound = 1.0 / math.sqrt(x["cols"])
                if x["name"] == "tok_embd":  # U(-1,1), scaled by 2/sqrt(dim) (at most 1) when tied
                    bound = min(1.0, 2.0 / math.sqrt(dim)) if tied else 1.0
                mean_abs = sum(abs(a) for a in v) / len(v)
                check(max(abs(a) for a in v) <= bound * 1.01 and mean_abs > bound * 0.3,
                      "%s: %s values out of scale (max %g, mean |x| %g, bound %g)" % (
                          tag, x["name"], max(abs(a) for a in v), mean_abs, bound))
        tok = m.tokenizer()
        if "TOK" in extra:
            check(tok is not None and tok[2] == open(c.tok, "rb").read(), "%s: tokenizer not embedded" % tag)
        else:
            check(tok is None and h["tokenizer_size"] == 0, "%s: unexpected tokenizer section" % tag)

    # Determinism: same seed, same bytes; another seed, other bytes; q8 and q4 hold the same model.
    a, b, d = c.path("seed_a.mlb"), c.path("seed_b.mlb"), c.path("seed_d.mlb")
    c.run(*random_args(c, RANDOM_SHAPES[1], a, seed=42))
    c.run(*random_args(c, RANDOM_SHAPES[1], b, seed=42))
    c.run(*random_args(c, RANDOM_SHAPES[1], d, seed=43))
    ba, bb, bd = (open(x, "rb").read() if os.path.exists(x) else b"" for x in (a, b, d))
    check(ba and ba == bb, "random: the same seed gave different files")
    check(ba != bd and len(ba) == len(bd), "random: another seed gave the same file")
    q8 = c.path("seed_q8.mlb")
    c.run(*random_args(c, RANDOM_SHAPES[1][:7] + ([],), q8, seed=42))
    if os.path.exists(q8) and ba:
        m4, m8 = Mlb(a), Mlb(q8)
        x4, x8 = m4.dequant(m4.by_name["blk.1.ffn_up"]), m8.dequant(m8.by_name["blk.1.ffn_up"])
        amax = max(abs(v) for v in x8)
        check(max(abs(p - q) for p, q in zip(x4, x8)) <= amax / 7, "random: q4 and q8 of one seed differ in model")

    # Bad options, each message naming the option.
    base = dict(dim=64, hidden=96, layers=2, heads=4, kv=2, vocab=100, seq=16)
    out = c.path("rbad.mlb")

    def bad(needle, **kw):
        s = dict(base, **kw)
        extra = kw.get("extra", [])
        c.expect_fail(2, needle, *random_args(c, (s["dim"], s["hidden"], s["layers"], s["heads"], s["kv"], s["vocab"],
                                                  s["seq"], extra), out))

    bad("--dim 48", dim=48)
    bad("--dim", dim=0)
    bad("--hidden 100", hidden=100)
    bad("--kv-heads", kv=3)
    bad("--vocab", vocab=2)
    bad("--layers", layers=0)
    bad("--max-seq", seq=0)
    bad("--head-dim", extra=["--head-dim", "12"])  # 4 x 12 = 48
    bad("--head-dim", extra=["--head-dim", "7"])
    bad("--heads", heads=3, kv=1)  # 64 / 3: no default head width
    bad("--rope-theta", extra=["--rope-theta", "-1"])
    bad("--rope-type", extra=["--rope-type", "sideways"])
    bad("--wtype", extra=["--wtype", "f32"])
    bad("--dim", extra=["--dim", "abc"])
    bad("vocab_size 100", extra=["--tokenizer", c.tok])
    check(not os.path.exists(out), "a failed random conversion left %s behind" % out)
    c.expect_fail(1, "missing_tok.bin", *random_args(c, RANDOM_SHAPES[0], out), "--tokenizer",
                  c.path("missing_tok.bin"))
    # A shape inside the engine's limits whose embedding (vocab x dim floats, 4 TiB) exceeds this
    # machine's RAM (or the address space): out of memory, exit 1 naming the tensor, decided before
    # any allocation (the converter once died on std::length_error).
    c.expect_fail(1, "tensor tok_embd", *random_args(c, (65536, 32, 1, 1, 1, 16777216, 8, ["--head-dim", "64"]),
                                                      out))
    # Beyond the engine's limits (model/limits.h): refused naming the option, as the loader would.
    c.expect_fail(2, "--dim 4294967264", *random_args(c, (4294967264, 32, 1, 1, 1, 100, 8, ["--head-dim", "64"]),
                                                       out))
    bad("--layers 5000", layers=5000)
    bad("--max-seq 4294967295", seq=4294967295)
    check(not os.path.exists(out), "an out-of-memory random conversion left %s behind" % out)


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    bin_dir, shared = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory(prefix="krafla_convert_") as work:
        c = Ctx(bin_dir, shared, work)
        if not os.path.exists(c.exe):
            print("FAIL: %s does not exist" % c.exe)
            return 1
        p, t = test_stories(c)
        test_llama2c_errors(c, p, t)
        test_random(c)
    print("test_convert: %d checks, %d failed" % (CHECKS[0], len(FAILURES)))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
