#!/usr/bin/env python3
"""Writes the seeds of fuzz.gguf (fuzz/gguf.cpp) into fuzz/corpus/gguf/: tiny GGUF files written
here from ggml's docs/gguf.md (no shared models), each prefixed with the harness's mode byte.
Run it from anywhere: python3 fuzz/make_gguf_seeds.py"""
import os
import random
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus", "gguf")
F32, F16, Q4_0, Q8_0, Q4_K, Q6_K = 0, 1, 2, 8, 12, 14
BLOCK = {F32: (1, 4), F16: (1, 2), Q4_0: (32, 18), Q8_0: (32, 34), Q4_K: (256, 144), Q6_K: (256, 210)}


def s(x):
    x = x.encode() if isinstance(x, str) else x
    return struct.pack("<Q", len(x)) + x


def kv(key, t, v):
    b = s(key) + struct.pack("<I", t)
    if t == 4:
        return b + struct.pack("<I", v)
    if t == 6:
        return b + struct.pack("<f", v)
    if t == 7:
        return b + bytes([v])
    if t == 8:
        return b + s(v)
    et, items = v
    b += struct.pack("<IQ", et, len(items))
    for x in items:
        b += s(x) if et == 8 else struct.pack({5: "<i", 6: "<f"}[et], x)
    return b


def data(t, rows, cols, rng):
    vals, nbytes = BLOCK[t]
    if t == F32:
        return b"".join(struct.pack("<f", rng.uniform(-1, 1)) for _ in range(rows * cols))
    out = bytearray(rng.getrandbits(8) for _ in range(rows * cols // vals * nbytes))
    if t == Q8_0:  # no -128 quant, small f16 scales
        for b in range(0, len(out), 34):
            out[b:b + 2] = struct.pack("<e", 0.01)
            for j in range(32):
                if out[b + 2 + j] == 0x80:
                    out[b + 2 + j] = 0
    elif t in (Q4_0, F16):
        step = 18 if t == Q4_0 else 2
        for b in range(0, len(out), step):
            out[b:b + 2] = struct.pack("<e", 0.01)
    elif t == Q4_K:
        for b in range(0, len(out), 144):
            out[b:b + 4] = struct.pack("<ee", 0.01, 0.001)
    elif t == Q6_K:
        for b in range(0, len(out), 210):
            out[b + 208:b + 210] = struct.pack("<e", 0.01)
    return bytes(out)


def gguf(kvs, tensors, align=32):
    head = struct.pack("<IIQQ", 0x46554747, 3, len(tensors), len(kvs)) + b"".join(kvs)
    body, infos = b"", b""
    for name, ne, t, d in tensors:
        infos += s(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
        infos += struct.pack("<IQ", t, len(body))
        body += d + b"\0" * (-len(d) % align)
    h = head + infos
    return h + b"\0" * (-len(h) % align) + body


def model(arch, mt, dim=32, hidden=64, vocab=8, tok=None, rng=None, kt=None):
    rng = rng or random.Random(1)
    p = arch + "."
    kvs = [kv("general.architecture", 8, arch), kv(p + "embedding_length", 4, dim), kv(p + "block_count", 4, 1),
           kv(p + "feed_forward_length", 4, hidden), kv(p + "attention.head_count", 4, 1),
           kv(p + "attention.head_count_kv", 4, 1), kv(p + "context_length", 4, 64),
           kv(p + "attention.layer_norm_rms_epsilon", 6, 1e-5)]
    if arch == "gemma3":
        kvs.append(kv(p + "attention.sliding_window", 4, 4))
    kvs += tok or []
    ts = []
    mat = lambda n, r, c, t=mt: ts.append((n, [c, r], t, data(t, r, c, rng)))
    vec = lambda n, k=dim: ts.append((n, [k], F32, data(F32, 1, k, rng)))
    mat("token_embd.weight", vocab, dim, kt or mt)
    vec("blk.0.attn_norm.weight")
    for x in ("q", "k", "v"):
        mat("blk.0.attn_%s.weight" % x, dim, dim)
        if arch == "qwen2":
            vec("blk.0.attn_%s.bias" % x)
    if arch in ("gemma3", "qwen3"):
        vec("blk.0.attn_q_norm.weight"), vec("blk.0.attn_k_norm.weight")
    mat("blk.0.attn_output.weight", dim, dim)
    if arch == "gemma3":
        vec("blk.0.post_attention_norm.weight")
    vec("blk.0.ffn_norm.weight")
    mat("blk.0.ffn_gate.weight", hidden, dim)
    mat("blk.0.ffn_up.weight", hidden, dim)
    mat("blk.0.ffn_down.weight", dim, hidden)
    if arch == "gemma3":
        vec("blk.0.post_ffw_norm.weight")
    vec("output_norm.weight")
    if kt:
        mat("output.weight", vocab, dim, kt)
    return gguf(kvs, ts)


def spm(n):
    toks = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % i for i in range(3)] + ["\u2581a", "b"][: n - 6]
    types = [2, 3, 3, 6, 6, 6, 1, 1][:n]
    return [kv("tokenizer.ggml.model", 8, "llama"), kv("tokenizer.ggml.tokens", 9, (8, toks)),
            kv("tokenizer.ggml.scores", 9, (6, [0.0] * 6 + [-1.0, -2.0])), kv("tokenizer.ggml.token_type", 9, (5, types)),
            kv("tokenizer.ggml.bos_token_id", 4, 1), kv("tokenizer.ggml.eos_token_id", 4, 2)]


def bpe(pre):
    toks = ["H", "e", "l", "o", "\u0120", "ll", "He", "<|end|>"]
    return [kv("tokenizer.ggml.model", 8, "gpt2"), kv("tokenizer.ggml.pre", 8, pre),
            kv("tokenizer.ggml.tokens", 9, (8, toks)), kv("tokenizer.ggml.token_type", 9, (5, [1] * 7 + [3])),
            kv("tokenizer.ggml.merges", 9, (8, ["l l", "H e"])), kv("tokenizer.ggml.eos_token_id", 4, 7),
            kv("tokenizer.ggml.add_bos_token", 7, 0),
            kv("tokenizer.chat_template", 8, "{% for m in messages %}{{ m.content }}<|end|>{% endfor %}")]


def main():
    os.makedirs(OUT, exist_ok=True)
    seeds = {
        "llama_f32_spm": (1, model("llama", F32, tok=spm(8))),
        "llama_q8_parse": (0, model("llama", Q8_0)),
        "llama_spm_json": (1, model("llama", F32, tok=spm(8) + [kv("tokenizer.chat_template", 8, "{{ messages[0].content }}"),
                                                              kv("tokenizer.ggml.add_space_prefix", 7, 0)])),
        "llama_q4": (3, model("llama", Q4_0)),
        "qwen2_f16_bpe": (1, model("qwen2", F16, tok=bpe("qwen2"))),
        "qwen3_q8_bpe": (5, model("qwen3", Q8_0, tok=bpe("llama-bpe"))),
        "gemma3_f32": (1, model("gemma3", F32)),
    }
    for name, (mode, b) in seeds.items():
        open(os.path.join(OUT, name), "wb").write(bytes([mode]) + b)
    rng = random.Random(2)
    open(os.path.join(OUT, "dequant_q4k"), "wb").write(bytes([2, Q4_K]) + data(Q4_K, 1, 512, rng))
    open(os.path.join(OUT, "dequant_q6k"), "wb").write(bytes([2, Q6_K]) + data(Q6_K, 1, 512, rng))


if __name__ == "__main__":
    main()
