#!/usr/bin/env python3
"""Tests of the oracle itself: ref_forward against a numpy forward pass written here from the
specification (docs/format.md, docs/tools.md, llama2.c's export.py), and compare_logits.py
against hand-built logits. Python 3 stdlib + numpy.

  test_ref_forward.py --ref-forward BIN --compare compare_logits.py --shared DIR CASE
CASE: llama2c_random | mlb_random | mlb_archs | mlb_features | stories260k | errors | compare_logits
"""
import argparse
import math
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


def inv_freqs(base, n_rot, scaling=0, factor=1.0, low=1.0, high=1.0, orig=1):
    """RoPE inverse frequencies, one per rotated pair, written from Hugging Face's
    modeling_rope_utils (default, "linear" and "llama3"), in plain Python floats."""
    inv = [1.0 / (base ** (2 * i / n_rot)) for i in range(n_rot // 2)]
    if scaling == 2:  # linear: positions / factor, i.e. frequencies / factor
        return [f / factor for f in inv]
    if scaling == 1:  # llama3, in the torch.where formulation of _compute_llama3_parameters
        low_wl, high_wl = orig / low, orig / high
        out = []
        for f in inv:
            wl = 2 * math.pi / f
            f_l = f / factor if wl > low_wl else f
            smooth = (orig / wl - low) / (high - low)
            smoothed = (1 - smooth) * f_l / factor + smooth * f_l
            medium = not (wl < high_wl) and not (wl > low_wl)
            out.append(smoothed if medium else f_l)
        return out
    return inv


def rope(v, n_heads, hd, pos, inv, rope_type, n_rot=None):
    """Rotates the first n_rot dims of each head: rope_type 1 as transformers' apply_rotary_pos_emb
    (x*cos + rotate_half(x)*sin with cos = cat(cos(f), cos(f))), 0 as llama2.c's pairs."""
    n_rot = hd if n_rot is None else n_rot
    v = v.copy()
    ang = pos * np.asarray(inv)
    for h in range(n_heads):
        x = v[h * hd:h * hd + n_rot].copy()
        if rope_type == 1:
            cos, sin = np.cos(np.concatenate([ang, ang])), np.sin(np.concatenate([ang, ang]))
            rot_half = np.concatenate([-x[n_rot // 2:], x[:n_rot // 2]])
            v[h * hd:h * hd + n_rot] = x * cos + rot_half * sin
        else:
            x0, x1 = x[0::2], x[1::2]
            v[h * hd:h * hd + n_rot:2] = x0 * np.cos(ang) - x1 * np.sin(ang)
            v[h * hd + 1:h * hd + n_rot:2] = x0 * np.sin(ang) + x1 * np.cos(ang)
    return v


def silu(a):
    return a / (1.0 + np.exp(-a))


def gelu_tanh(a):
    return 0.5 * a * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (a + 0.044715 * a ** 3)))


def delta_layer(m, ly, h, hist, S):
    """Qwen3.5's gated-delta layer for one token in pure Python (lists, math), written from
    transformers' Qwen3_5GatedDeltaNet and torch_recurrent_gated_delta_rule. hist: the list of
    all previous in_proj_qkv outputs of this layer (the conv input); S: per value head a dk x dv
    list of lists (updated in place). Returns the vector fed to ssm_out (before act())."""
    nk, nv, dk, dv, K = m["nk"], m["nv"], m["dk"], m["dv"], m["K"]
    qkv = list(ly["wqkv"] @ h)
    z, b, a = list(ly["wz"] @ h), list(ly["wb"] @ h), list(ly["wa"] @ h)
    hist.append(qkv)
    T = len(hist)
    # F.conv1d(padding=K-1)[..., :T] of the whole sequence, last position: tap j sees input T-K+j.
    conv = []
    for ch in range(len(qkv)):
        acc = 0.0
        for j in range(K):
            t = T - K + j
            acc += ly["conv"][ch][j] * (hist[t][ch] if t >= 0 else 0.0)
        conv.append(acc / (1.0 + math.exp(-acc)))
    q = [conv[i * dk:(i + 1) * dk] for i in range(nk)]
    k = [conv[nk * dk + i * dk:nk * dk + (i + 1) * dk] for i in range(nk)]
    v = [conv[2 * nk * dk + i * dv:2 * nk * dk + (i + 1) * dv] for i in range(nv)]
    l2 = lambda x: [e / math.sqrt(sum(y * y for y in x) + 1e-6) for e in x]
    q = [[e / math.sqrt(dk) for e in l2(x)] for x in q]
    k = [l2(x) for x in k]
    out = []
    for j in range(nv):
        kh = j // (nv // nk)  # repeat_interleave: consecutive value heads share a key head
        beta = 1.0 / (1.0 + math.exp(-b[j]))
        x = a[j] + ly["dt"][j]
        g = ly["A"][j] * (x if x > 20 else math.log1p(math.exp(x)))
        Sj = S[j]
        for i in range(dk):
            for e in range(dv):
                Sj[i][e] *= math.exp(g)
        mem = [sum(Sj[i][e] * k[kh][i] for i in range(dk)) for e in range(dv)]
        delta = [(v[j][e] - mem[e]) * beta for e in range(dv)]
        for i in range(dk):
            for e in range(dv):
                Sj[i][e] += k[kh][i] * delta[e]
        o = [sum(Sj[i][e] * q[kh][i] for i in range(dk)) for e in range(dv)]
        r = 1.0 / math.sqrt(sum(e * e for e in o) / dv + m["eps"])
        for e in range(dv):
            zz = z[j * dv + e]
            out.append(ly["snorm"][e] * (o[e] * r) * (zz / (1.0 + math.exp(-zz))))
    return np.array(out)


def np_forward(m, tokens, quantized, kv="f64"):
    """Logits (len(tokens) x vocab), one position at a time. Keys a Llama model dict may lack
    take their Llama defaults."""
    act = act_q8 if quantized else (lambda a: a)
    g = m.get
    hd, nh, nkv, L = m["head_dim"], m["n_heads"], m["n_kv_heads"], len(m["layers"])
    n_rot = g("n_rot", 0) or hd
    inv_global = inv_freqs(m["theta"], n_rot, g("rope_scaling", 0), g("rope_factor", 1.0), g("low", 1.0),
                           g("high", 1.0), g("orig", 1))
    inv_local = inv_freqs(g("local_theta"), n_rot) if g("local_theta", 0) else inv_global
    window, pattern, period = g("window", 0), g("pattern", 0), g("linear_period", 0)
    post = g("post_norms", False)
    kvdim = nkv * hd
    T = len(tokens)
    K = np.zeros((L, T, kvdim))
    V = np.zeros((L, T, kvdim))
    KD = np.zeros((L, T, nkv))
    hist = [[] for _ in range(L)]
    S = [[[[0.0] * g("dv", 0) for _ in range(g("dk", 0))] for _ in range(g("nv", 0))] for _ in range(L)]
    out = []
    norm = lambda x, w: rmsnorm(x, w, m["eps"])
    for pos, tok in enumerate(tokens):
        x = m["emb"][tok] * m["embed_scale"]
        for l, ly in enumerate(m["layers"]):
            h = act(norm(x, ly["attn_norm"]))
            if period and l % period != period - 1:
                r = ly["wout"] @ act(delta_layer(m, ly, h, hist[l], S[l]))
                x = x + (norm(r, ly["pan"]) if post else r)
            else:
                q, k, v = ly["wq"] @ h, ly["wk"] @ h, ly["wv"] @ h
                if g("qkv_bias"):
                    q, k, v = q + ly["bq"], k + ly["bk"], v + ly["bv"]
                if g("qk_norm"):
                    q = np.concatenate([norm(q[i * hd:(i + 1) * hd], ly["qn"]) for i in range(nh)])
                    k = np.concatenate([norm(k[i * hd:(i + 1) * hd], ly["kn"]) for i in range(nkv)])
                sliding = window > 0 and not (pattern > 0 and l % pattern == pattern - 1)
                inv = inv_local if sliding else inv_global
                q = rope(q, nh, hd, pos, inv, m["rope_type"], n_rot)
                k = rope(k, nkv, hd, pos, inv, m["rope_type"], n_rot)
                if kv == "f64":
                    K[l, pos], V[l, pos] = k, v
                elif kv == "f32":
                    K[l, pos], V[l, pos] = k.astype(F32), v.astype(F32)
                elif kv == "f16":
                    K[l, pos], V[l, pos] = k.astype(np.float16), v.astype(np.float16)
                else:  # q8: one scale per position and KV head
                    for gg in range(nkv):
                        sl = slice(gg * hd, (gg + 1) * hd)
                        K[l, pos, sl], KD[l, pos, gg] = q8_group(k[sl])
                        vq, vd = q8_group(v[sl])
                        V[l, pos, sl] = vq * vd
                # The causal mask, and a sliding layer's window: key j is seen iff j > pos - window.
                seen = [j for j in range(pos + 1) if not sliding or j > pos - window]
                o = np.zeros(nh * hd)
                for hh in range(nh):
                    gg = hh // (nh // nkv)
                    sl = slice(gg * hd, (gg + 1) * hd)
                    qh = q[hh * hd:(hh + 1) * hd]
                    if kv == "q8":
                        qq, qd = q8_group(qh)
                        s = (K[l, seen, sl] @ qq) * qd * KD[l, seen, gg]
                    else:
                        s = K[l, seen, sl] @ qh
                    s = s * g("attn_scale") if g("attn_scale", 0) else s / np.sqrt(hd)
                    e = np.exp(s - s.max())
                    o[hh * hd:(hh + 1) * hd] = V[l, seen, sl].T @ (e / e.sum())
                if g("attn_gate"):
                    o = o / (1.0 + np.exp(-(ly["wg"] @ h)))
                r = ly["wo"] @ act(o)
                x = x + (norm(r, ly["pan"]) if post else r)
            h = act(norm(x, ly["ffn_norm"]))
            gate, up = ly["w1"] @ h, ly["w3"] @ h
            y = ly["w2"] @ act((gelu_tanh(gate) if g("act", 0) == 1 else silu(gate)) * up)
            x = x + (norm(y, ly["pfn"]) if post else y)
        wcls = m["emb"] if m["wcls"] is None else m["wcls"]
        logits = wcls @ act(norm(x, m["out_norm"]))
        if g("softcap", 0):
            logits = g("softcap") * np.tanh(logits / g("softcap"))
        out.append(logits)
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


# Header fields of .mlb version 2 (docs/format.md): name -> (offset, struct format).
HEADER_FIELDS = dict(
    version=(8, "I"), header_size=(12, "I"), arch=(16, "I"), dim=(20, "I"), hidden_dim=(24, "I"),
    n_layers=(28, "I"), n_heads=(32, "I"), n_kv_heads=(36, "I"), head_dim=(40, "I"), vocab_size=(44, "I"),
    max_seq=(48, "I"), wtype=(52, "I"), scale_type=(56, "I"), norm_eps=(60, "f"), rope_theta=(64, "f"),
    rope_type=(68, "I"), rope_scaling=(72, "I"), rope_factor=(76, "f"), rope_low_freq_factor=(80, "f"),
    rope_high_freq_factor=(84, "f"), rope_orig_max_seq=(88, "I"), flags=(92, "I"), activation=(96, "I"),
    embed_scale=(100, "f"), sliding_window=(104, "I"), sliding_pattern=(108, "I"), linear_period=(112, "I"),
    linear_k_heads=(116, "I"), linear_v_heads=(120, "I"), linear_k_dim=(124, "I"), linear_v_dim=(128, "I"),
    linear_conv=(132, "I"), bos_id=(136, "I"), eos_id=(140, "I"), hidden_dim_orig=(144, "I"),
    n_tensors=(148, "I"), dir_offset=(152, "Q"), tokenizer_offset=(160, "Q"), tokenizer_size=(168, "Q"),
    file_size=(176, "Q"), rope_local_theta=(184, "f"), n_rot=(188, "I"), attn_scale=(192, "f"),
    logit_softcap=(196, "f"))


def write_mlb(path, tensors, fields):
    """Lays out tensors [(name, type, scale_type, rows, cols, data, scales)] after the header and
    directory, 64-byte aligned, and writes the header from fields (HEADER_FIELDS names)."""
    dir_off = 256
    pos = dir_off + 96 * len(tensors)
    align = lambda p: (p + 63) // 64 * 64
    entries = []
    for name, t, st, rows, cols, data, sc in tensors:
        doff = align(pos)
        soff = align(doff + len(data)) if sc else 0
        entries.append((name, t, st, rows, cols, doff, len(data), soff, len(sc)))
        pos = soff + len(sc) if sc else doff + len(data)
    buf = bytearray(pos)
    for e, (name, t, st, rows, cols, data, sc) in zip(entries, tensors):
        buf[e[5]:e[5] + len(data)] = data
        buf[e[7]:e[7] + len(sc)] = sc
    for i, e in enumerate(entries):
        struct.pack_into("<48sIIIIQQQQ", buf, dir_off + 96 * i, e[0].encode(), *e[1:])
    buf[0:8] = b"KRAFLMLB"
    all_fields = dict(version=2, header_size=256, n_tensors=len(tensors), dir_offset=dir_off, file_size=pos,
                      bos_id=1, eos_id=2)
    all_fields.update(fields)
    for name, val in all_fields.items():
        off, fmt = HEADER_FIELDS[name]
        struct.pack_into("<" + fmt, buf, off, val)
    with open(path, "wb") as f:
        f.write(buf)


def make_mlb2(path, rng, dim=64, hidden=96, layers=2, nh=4, nkv=2, hd=16, vocab=50, seq=24, wtype=2,
              scale_type=0, rope_type=1, tied=False, embed_scale=1.0, theta=10000.0, eps=1e-5, arch=0,
              version=2, n_rot=0, local_theta=0.0, rope_scaling=0, rope_factor=1.0, low=1.0, high=1.0, orig=0,
              attn_scale=0.0, softcap=0.0, act=0, window=0, pattern=0, linear_period=0, nk=0, nv=0, dk=0, dv=0,
              K=0, qkv_bias=False, qk_norm=False, post_norms=False, attn_gate=False, tweak=None):
    """Writes a random .mlb of any architecture per docs/format.md; returns the numpy model.
    tweak(tensors) may edit the tensor list before writing (error tests)."""
    tensors = []
    f32 = lambda v: float(F32(v))

    def q(name, rows, cols):
        w, data, sc = qtensor(rng, rows, cols, wtype, scale_type)
        tensors.append((name, wtype, scale_type, rows, cols, data, sc))
        return w

    def vec(name, n, mean=1.0, sc=0.2):
        w = (mean + sc * rng.standard_normal(n)).astype(F32)
        tensors.append((name, 0, 0, 1, n, f32bytes(w), b""))
        return w.astype(F64)

    emb = q("tok_embd", vocab, dim)
    ly = []
    for l in range(layers):
        p = f"blk.{l}."
        d = dict(attn_norm=vec(p + "attn_norm", dim))
        if linear_period and l % linear_period != linear_period - 1:
            ch = 2 * nk * dk + nv * dv
            d.update(wqkv=q(p + "attn_qkv", ch, dim), wz=q(p + "attn_gate", nv * dv, dim),
                     wb=q(p + "ssm_beta", nv, dim), wa=q(p + "ssm_alpha", nv, dim))
            conv = (0.5 * rng.standard_normal((ch, K))).astype(F32)
            tensors.append((p + "ssm_conv1d", 0, 0, ch, K, f32bytes(conv), b""))
            d["conv"] = conv.astype(F64).tolist()
            d["A"] = vec(p + "ssm_a", nv, mean=-1.0, sc=0.3).tolist()  # A = -exp(A_log) < 0
            d["dt"] = vec(p + "ssm_dt", nv, mean=0.0, sc=1.0).tolist()
            d["snorm"] = vec(p + "ssm_norm", dv).tolist()
            d["wout"] = q(p + "ssm_out", dim, nv * dv)
        else:
            d.update(wq=q(p + "attn_q", nh * hd, dim), wk=q(p + "attn_k", nkv * hd, dim),
                     wv=q(p + "attn_v", nkv * hd, dim))
            if qkv_bias:
                d.update(bq=vec(p + "attn_q.bias", nh * hd, 0.0, 0.5), bk=vec(p + "attn_k.bias", nkv * hd, 0.0, 0.5),
                         bv=vec(p + "attn_v.bias", nkv * hd, 0.0, 0.5))
            if qk_norm:
                d.update(qn=vec(p + "attn_q_norm", hd), kn=vec(p + "attn_k_norm", hd))
            if attn_gate:
                d["wg"] = q(p + "attn_gate", nh * hd, dim)
            d["wo"] = q(p + "attn_output", dim, nh * hd)
        if post_norms:
            d.update(pan=vec(p + "post_attention_norm", dim), pfn=vec(p + "post_ffw_norm", dim))
        d.update(ffn_norm=vec(p + "ffn_norm", dim), w1=q(p + "ffn_gate", hidden, dim), w3=q(p + "ffn_up", hidden, dim),
                 w2=q(p + "ffn_down", dim, hidden))
        ly.append(d)
    out_norm = vec("output_norm", dim)
    wcls = None if tied else q("output", vocab, dim)
    rng.shuffle(tensors)  # directory order is free
    if tweak:
        tweak(tensors)
    flags = (1 if qkv_bias else 0) | (2 if qk_norm else 0) | (4 if post_norms else 0) | (8 if tied else 0) | \
        (16 if attn_gate else 0)
    fields = dict(version=version, arch=arch, dim=dim, hidden_dim=hidden, n_layers=layers, n_heads=nh,
                  n_kv_heads=nkv, head_dim=hd, vocab_size=vocab, max_seq=seq, wtype=wtype, scale_type=scale_type,
                  norm_eps=eps, rope_theta=theta, rope_type=rope_type, rope_scaling=rope_scaling,
                  rope_factor=rope_factor, rope_low_freq_factor=low, rope_high_freq_factor=high,
                  rope_orig_max_seq=orig, flags=flags, activation=act, embed_scale=embed_scale,
                  sliding_window=window, sliding_pattern=pattern, linear_period=linear_period, linear_k_heads=nk,
                  linear_v_heads=nv, linear_k_dim=dk, linear_v_dim=dv, linear_conv=K, hidden_dim_orig=hidden)
    if version == 2:
        fields.update(rope_local_theta=local_theta, n_rot=n_rot, attn_scale=attn_scale, logit_softcap=softcap)
    write_mlb(path, tensors, fields)
    return dict(dim=dim, hidden=hidden, n_heads=nh, n_kv_heads=nkv, head_dim=hd, vocab=vocab, seq=seq,
                eps=f32(eps), theta=f32(theta), rope_type=rope_type, embed_scale=f32(embed_scale), emb=emb,
                layers=ly, out_norm=out_norm, wcls=wcls, n_rot=n_rot, local_theta=f32(local_theta),
                rope_scaling=rope_scaling, rope_factor=f32(rope_factor), low=f32(low), high=f32(high), orig=orig,
                attn_scale=f32(attn_scale), softcap=f32(softcap), act=act, window=window, pattern=pattern,
                linear_period=linear_period, nk=nk, nv=nv, dk=dk, dv=dv, K=K, qkv_bias=qkv_bias,
                qk_norm=qk_norm, post_norms=post_norms, attn_gate=attn_gate)


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


# The architectures of format version 2, each a small random model (kwargs of make_mlb2).
ARCH_CONFIGS = [
    ("llama3 (rope_scaling llama3, GQA, tied)",
     dict(arch=0, theta=10000.0, rope_scaling=1, rope_factor=8.0, low=1.0, high=4.0, orig=64, tied=True)),
    ("llama v1 file", dict(arch=0, version=1, rope_type=0)),
    ("interleaved pairs on n_rot 8 of 16, Q4", dict(arch=0, rope_type=0, n_rot=8, wtype=3)),
    ("qwen2.5 (q/k/v biases, Q4 f16 scales, tied)",
     dict(arch=1, wtype=3, scale_type=1, qkv_bias=True, tied=True, theta=1e6)),
    ("qwen3 (q/k norms, q_dim 128 != dim 64)", dict(arch=2, nh=4, nkv=2, hd=32, qk_norm=True, theta=1e6)),
    ("gemma3 (post norms, GELU, embed scale, windows, local base, linear scaling, attn_scale, softcap)",
     dict(arch=3, layers=4, nh=4, nkv=1, hd=16, qk_norm=True, post_norms=True, act=1, embed_scale=8.0, window=3,
          pattern=2, local_theta=10000.0, theta=1e6, rope_scaling=2, rope_factor=8.0, attn_scale=24 ** -0.5,
          softcap=3.0, tied=True)),
    ("qwen3.5 (gated delta layers 0-2 and 4, gated attention layer 3 with n_rot 8 of 32)",
     dict(arch=4, layers=5, nh=2, nkv=1, hd=32, n_rot=8, qk_norm=True, attn_gate=True, theta=1e7, tied=True,
          linear_period=4, nk=2, nv=4, dk=8, dv=16, K=4)),
]


def case_mlb_archs(c):
    """Every architecture against the numpy reference (which computes the gated-delta layers in
    pure Python and the RoPE tables with plain floats), with each emulated cache."""
    rng = np.random.default_rng(2024)
    tokens = [1, 17, 4, 4, 33, 2, 48, 10, 0, 25, 7]
    # The llama3 config's frequencies fall in all three bands (wavelength 2*pi/f below orig/high,
    # between, above orig/low), so each branch of the scaling is exercised.
    waves = [2 * math.pi / f for f in inv_freqs(10000.0, 16)]
    assert min(waves) < 64 / 4 and any(16 <= w <= 64 for w in waves) and max(waves) > 64, waves
    for label, kw in ARCH_CONFIGS:
        path = os.path.join(c.tmp, "arch.mlb")
        m = make_mlb2(path, rng, **kw)
        for kv in ("f32", "f16", "q8"):
            want = np_forward(m, tokens, quantized=True, kv=kv)
            got, _ = c.ref_logits(path, tokens, m["vocab"], "--kv", kv)
            check_close(f"{label} --kv {kv}", got, want, TIGHT)
        assert rel_err(got, np_forward(m, tokens, False, "q8")) > 1e-4, "activation quantization has no effect?"
        ids = c.run_ref(path, "--tokens", "1 17", "-n", 5).stdout.split()
        assert list(map(int, ids)) == greedy(m, [1, 17], 5, True, "f32"), f"greedy ids {ids}"


def case_mlb_features(c):
    """Properties with an exact, hand-derived expectation (no reference forward pass): files that
    differ only in their header must give the same or predictably related logits."""
    tokens = [3, 9, 3, 14, 9, 3, 22, 5]

    def logits(seed, **kw):
        path = os.path.join(c.tmp, "feat.mlb")
        m = make_mlb2(path, np.random.default_rng(seed), **kw)
        return c.ref_logits(path, tokens, m["vocab"])[0]

    def same(name, a, b):
        assert np.array_equal(a, b), f"{name}: logits differ by {np.abs(a - b).max():.3e}"
        print(f"  {name}: identical")

    def differ(name, a, b):
        assert rel_err(a, b) > 1e-4, f"{name}: no effect ({rel_err(a, b):.3e})"
        print(f"  {name}: differs ({rel_err(a, b):.2e})")
    base = dict(layers=2, nh=4, nkv=2, hd=16)
    ref = logits(1, **base)
    same("version 1 file = version 2 with default v2 fields", ref, logits(1, version=1, **base))
    same("n_rot = head_dim equals n_rot 0", ref, logits(1, n_rot=16, **base))
    differ("n_rot 8 < head_dim", ref, logits(1, n_rot=8, **base))
    same("attn_scale 0.25 = 1/sqrt(16) equals attn_scale 0", ref, logits(1, attn_scale=0.25, **base))
    differ("attn_scale 0.5", ref, logits(1, attn_scale=0.5, **base))
    # A window no shorter than the prompt changes nothing; a sliding layer with local base = the
    # global base ignores the global table's scaling (only rope_theta's table is scaled).
    same("window >= prompt", ref, logits(1, window=len(tokens), **base))
    same("all-sliding layers use the unscaled local base", ref,
         logits(1, window=len(tokens), local_theta=10000.0, rope_scaling=2, rope_factor=8.0, **base))
    differ("rope_scaling linear on the global table", ref, logits(1, rope_scaling=2, rope_factor=8.0, **base))
    differ("window 3 on every layer", ref, logits(1, window=3, **base))
    differ("window 3, layer 1 global", logits(1, window=3, **base), logits(1, window=3, pattern=2, **base))
    # llama3 scaling: every wavelength below orig/high leaves the frequencies unchanged; every
    # wavelength above orig/low divides them all by factor, i.e. linear scaling.
    same("llama3 with all frequencies high", ref,
         logits(1, rope_scaling=1, rope_factor=8.0, low=1.0, high=4.0, orig=4000000000, **base))
    same("llama3 with all frequencies low = linear", logits(1, rope_scaling=2, rope_factor=8.0, **base),
         logits(1, rope_scaling=1, rope_factor=8.0, low=1.0, high=4.0, orig=1, **base))
    # Window 1 on every layer: each position attends to itself only (softmax of one score = 1,
    # output = its own v), so the logits depend on the current token alone.
    w1 = logits(2, window=1, **base)
    for i, t in enumerate(tokens):
        j = tokens.index(t)
        assert np.array_equal(w1[i], w1[j]), f"window 1: position {i} differs from {j} (same token {t})"
    w2 = logits(2, window=2, **base)
    assert not np.array_equal(w2[2], w2[0]), "window 2 should see the previous token"
    print("  window 1: logits depend on the current token only")
    # Soft-capping: c * tanh(l / c) of the uncapped logits (both dumps are float32).
    c_ = 2.0
    raw = logits(3, **base)
    capped = logits(3, softcap=c_, **base)
    assert np.abs(raw).max() > 2 * c_, "the cap should bind somewhere"
    err = np.abs(capped - c_ * np.tanh(raw / c_)).max()
    assert err <= 4e-7 * c_, f"softcap: {err:.3e}"
    print(f"  softcap {c_}: c*tanh(l/c) of the uncapped logits within {err:.1e}")


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
    # Version 2 headers and the optional tensors.
    small = dict(dim=32, hidden=32, layers=2, nh=2, nkv=1, hd=16, vocab=10, seq=8)
    v2 = os.path.join(c.tmp, "v2.mlb")
    make_mlb2(v2, rng, **small)
    raw2 = open(v2, "rb").read()
    lin = os.path.join(c.tmp, "lin.mlb")
    make_mlb2(lin, rng, **small, linear_period=2, nk=1, nv=2, dk=16, dv=16, K=3)
    rawl = open(lin, "rb").read()
    bias = os.path.join(c.tmp, "bias.mlb")
    make_mlb2(bias, rng, **small, qkv_bias=True)
    rawb = open(bias, "rb").read()
    for good_file in (v2, lin, bias):
        c.run_ref(good_file, "--tokens", "1 2 3", "--dump-logits", out)

    def field(data, name, val):
        off, fmt = HEADER_FIELDS[name]
        b = bytearray(data)
        struct.pack_into("<" + fmt, b, off, val)
        return bytes(b)
    bad_file("v2_reserved.mlb", raw2[:200] + b"\1" + raw2[201:], "reserved byte at offset 200")
    bad_file("v1_with_v2_field.mlb", field(field(raw2, "version", 1), "n_rot", 8), "reserved byte at offset 188")
    bad_file("flags.mlb", field(raw2, "flags", 32), "flags")
    bad_file("rope_scaling.mlb", field(raw2, "rope_scaling", 3), "rope_scaling")
    llama3 = field(field(field(raw2, "rope_scaling", 1), "rope_factor", 8.0), "rope_orig_max_seq", 64)
    bad_file("llama3_factors.mlb", field(field(llama3, "rope_low_freq_factor", 4.0), "rope_high_freq_factor", 4.0),
             "rope_high_freq_factor")
    bad_file("linear_factor.mlb", field(field(raw2, "rope_scaling", 2), "rope_factor", 0.0), "rope_factor")
    bad_file("activation.mlb", field(raw2, "activation", 2), "activation")
    bad_file("n_rot_odd.mlb", field(raw2, "n_rot", 3), "n_rot")
    bad_file("n_rot_big.mlb", field(raw2, "n_rot", 18), "n_rot")
    bad_file("pattern.mlb", field(raw2, "sliding_pattern", 2), "sliding_pattern")
    bad_file("softcap.mlb", field(raw2, "logit_softcap", -1.0), "logit_softcap")
    bad_file("attn_scale.mlb", field(raw2, "attn_scale", float("nan")), "attn_scale")
    bad_file("local_theta.mlb", field(raw2, "rope_local_theta", float("inf")), "rope_local_theta")
    bad_file("linear_fields.mlb", field(raw2, "linear_period", 2), "linear_k_heads")
    bad_file("linear_heads.mlb", field(rawl, "linear_k_heads", 3), "linear_v_heads")
    bad_file("linear_period.mlb", field(rawl, "linear_period", 0), "blk.0.attn_q missing")
    bad_file("linear_layers.mlb", field(rawl, "linear_period", 3), "blk.1.attn_qkv missing")
    bad_file("flag_bias.mlb", field(raw2, "flags", 1), "blk.0.attn_q.bias missing")
    bad_file("flag_qknorm.mlb", field(raw2, "flags", 2), "attn_q_norm missing")
    bad_file("flag_post.mlb", field(raw2, "flags", 4), "post_attention_norm missing")
    bad_file("flag_gate.mlb", field(raw2, "flags", 16), "attn_gate missing")
    bad_file("no_flag_bias.mlb", field(rawb, "flags", 0), "unexpected tensor blk.0.attn_k.bias")
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


CASES = {"llama2c_random": case_llama2c_random, "mlb_random": case_mlb_random, "mlb_archs": case_mlb_archs,
         "mlb_features": case_mlb_features,
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
