#!/usr/bin/env python3
"""krafla against llama.cpp (node-llama-cpp 3.22.1, its prebuilt CPU binary; llamacpp_run.mjs).

For random Llama models (Q8 and Q4 with f16 scales, the tok512 vocabulary, GQA, a few layers),
one `ml_convert random ... -o M.mlb --gguf M.gguf` writes both files; then on the same prompt ids
llama.cpp generates 32 tokens greedily and returns its raw logits after every fed token, and
krafla's logits on prompt + llama.cpp's tokens (`ml_run --dump-logits --kv f16`; f16 is
llama.cpp's cache type) are compared row by row with tools/compare_logits.py's metrics:
  - KL(llama.cpp || krafla) <= KL_MAX (1e-3) and >= 4 of the top 5 at every row (measured: at most
    2.4e-5 for Llama, 2.1e-4 for Qwen3, 5.5e-4 for Gemma 3, whose q/k norms and post-norms amplify
    the engines' rounding differences),
  - the same argmax at every row where llama.cpp's top two logits are at least TIE_GAP (0.01)
    apart. The two engines differ by ~0.01 in a logit (~0.5% of the largest: llama.cpp rounds
    activations and attention to its own Q8_0/f16 steps), and random models' logits are O(1)
    over 512 tokens, so a few rows in 50 are closer ties than that and may flip.
Greedy continuations: the first prompt (seeds 1, 2, ...) on which no row of llama.cpp's run is
such a near tie is used, and there krafla's own greedy run (`ml_run --tokens P -n 32 --temp 0`)
must print exactly the text of llama.cpp's 32 ids (`ml_tok decode`) and agree on every argmax.
Mutations of the GGUF file (gate/up swapped, q/k rows in the rotate-half layout, a norm offset by
+1) must each fail that comparison: the test shows it catches the mistakes it is there for.
Architectures (class Archs): qwen2, qwen3, gemma3 and a Llama in Hugging Face's rotate-half
layout (SmolLM2), from their real config.json files (`ml_convert random --config`, shortened), under
the same criterion. Roundtrip: `ml_convert gguf` of each written GGUF (Qwen3.5 included) gives back
the .mlb's logits bit for bit. The real llama-2-tiny-random.gguf (F16, 32000 tokens) through `ml_convert gguf`:
krafla's greedy tokens and logits against llama.cpp's on the file itself.

  test_llamacpp.py --bin BUILD/bin --shared SHARED --work DIR [--node node] [-k NAME]
Prints "SKIP (llama.cpp): ..." and exits 0 when e2e/llamacpp's node_modules is not installed
(scripts/install-deps runs npm ci there).
"""
import argparse
import json
import os
import random
import struct
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "cli"))
import harness as h  # noqa: E402

sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
import compare_logits as cl  # noqa: E402
np = cl.np

ENV = None
NODE = "node"
DRIVER = os.path.join(HERE, "llamacpp_run.mjs")
KL_MAX = 1e-3
TIE_GAP = 0.01
N_GEN = 32
VOCAB = 512
SEARCH = 40  # prompt seeds tried for a run without near ties
SEARCH_BATCH = 16  # of those, how many one node process runs (a start costs ~1.4 s; seeds 1-14 sufficed)
# Qwen3.5's gated-delta layers differ more between the engines: logits ~3-4% of the largest apart
# (the others ~1.5%), KL up to 1.7e-3 over 4 layers and growing with depth (1e-3 mean at 8). Its
# bounds are 5x looser; a structural mistake is far outside them (q and the output gate swapped
# in attn_q: KL 2e-2 to 8e-2).
# Gemma 3's logits differ by up to 2.9% of the largest (post-norms and q/k norms): its near ties
# are 0.03 apart (the KL bound stays). A window of 8 instead of 512 moves Gemma 3's logits by KL
# ~0.5, so the agreement with the shortened window shows llama.cpp applies the same window.
TOLERANCE = {"qwen35": (5e-3, 0.04), "gemma3": (KL_MAX, 0.03), "gemma3_swa": (KL_MAX, 0.03)}  # (KL_MAX, TIE_GAP)

# Shapes: name -> ml_convert random options (all GQA, tok512's 512 tokens).
SHAPES = {
    "gqa2": ["--dim", "128", "--hidden", "384", "--layers", "3", "--heads", "4", "--kv-heads", "2", "--seed", "1"],
    "gqa4": ["--dim", "256", "--hidden", "512", "--layers", "4", "--heads", "8", "--kv-heads", "2", "--seed", "3"],
    "mqa_hd32": ["--dim", "64", "--hidden", "192", "--layers", "2", "--heads", "4", "--kv-heads", "1", "--head-dim",
                 "32", "--seed", "9"],
}


def prompt_ids(seed=5, n=12):
    r = random.Random(seed)
    return [1] + [r.randrange(3, VOCAB) for _ in range(n)]


# Architectures from the real config.json files (../shared/data/hf), shortened: name -> (folder,
# options overriding the config's shape). Gemma 3 keeps head_dim 256, where llama.cpp's attention
# scale 1/sqrt(head_dim) equals the config's query_pre_attn_scalar^-1/2, and 6 layers, so that its
# sliding-window pattern (5 sliding, 1 global) is there.
ARCHS = {
    "qwen2": ("qwen2.5-0.5b-instruct", "--dim 128 --hidden 256 --layers 2 --heads 4 --kv-heads 2 --head-dim 32"),
    "qwen3": ("qwen3-0.6b", "--dim 128 --hidden 256 --layers 2 --heads 4 --kv-heads 2 --head-dim 64"),
    "gemma3": ("gemma-3-1b-it", "--dim 128 --hidden 256 --layers 6 --heads 2 --kv-heads 1 --head-dim 256"),
    "llama_smollm2": ("smollm2-135m-instruct", "--dim 128 --hidden 256 --layers 2 --heads 4 --kv-heads 2"),
    # Llama 3.2: its llama3 RoPE scaling goes into the GGUF as a rope_freqs.weight tensor.
    "llama32": ("llama-3.2-1b-instruct", "--dim 128 --hidden 256 --layers 2 --heads 4 --kv-heads 2 --head-dim 32"),
    # Qwen3.5: 3 gated-delta layers and 1 gated full-attention layer (head_dim 256, 64 rotated).
    "qwen35": ("qwen3.5-0.8b", "--dim 128 --hidden 256 --layers 4 --heads 4 --kv-heads 2"),
}
for _name, (_dir, _args) in ARCHS.items():
    _cfg = "config.reconstructed.json" if _name == "qwen35" else "config.json"
    SHAPES[_name] = ["--config", "%CONFIG%/" + _dir + "/" + _cfg] + _args.split() + ["--seed", "1"]
SHAPES["gqa2_half"] = SHAPES["gqa2"] + ["--rope-type", "half"]
# Gemma 3 with its sliding window shortened to 8 (a copy of the config written into the work folder),
# so that the 5 sliding layers of 6 see fewer positions than the global one within these runs.
SHAPES["gemma3_swa"] = [a.replace("%CONFIG%/gemma-3-1b-it/config.json", "%WORK%/gemma3_swa.json")
                        for a in SHAPES["gemma3"]]


def make_pair(name, shape, wtype):
    base = ENV.path("%s_%s" % (name, wtype))
    mlb, gguf = base + ".mlb", base + ".gguf"
    if shape == "gemma3_swa" and not os.path.exists(ENV.path("gemma3_swa.json")):
        with open(ENV.shared_path("data/hf/gemma-3-1b-it/config.json")) as f:
            cfg = json.load(f)
        cfg["sliding_window"] = 8
        with open(ENV.path("gemma3_swa.json"), "w") as f:
            json.dump(cfg, f)
    args = [a.replace("%CONFIG%", ENV.shared_path("data/hf")).replace("%WORK%", ENV.work) for a in SHAPES[shape]]
    h.run([ENV.exe("ml_convert"), "random"] + args +
          ["--vocab", VOCAB, "--max-seq", 256, "--wtype", wtype, "--scales", "f16",
           "--tokenizer", ENV.shared_path("models/tok512.bin"), "-o", mlb, "--gguf", gguf])
    return mlb, gguf


def llamacpp_many(gguf, prompts, n=N_GEN, logits=True):
    """llama.cpp's greedy runs of several prompts, each from an empty sequence, in one node process."""
    cmd = [NODE, DRIVER, gguf, "-n", n] + (["--logits"] if logits else [])
    for ids in prompts:
        cmd += ["--tokens", " ".join(map(str, ids))]
    runs = [json.loads(line) for line in h.run(cmd)[1].splitlines() if line.strip()]
    assert len(runs) == len(prompts), "llamacpp_run.mjs printed %d runs for %d prompts" % (len(runs), len(prompts))
    return runs


def llamacpp(gguf, ids, n=N_GEN, logits=True):
    return llamacpp_many(gguf, [ids], n, logits)[0]


def write_rows(rows, path):
    with open(path, "wb") as f:
        for r in rows:
            f.write(struct.pack("<%df" % len(r), *r))
    return path


def near_ties(rows, gap=TIE_GAP):
    """Per row of llama.cpp's logits: whether its top two are closer than gap."""
    top2 = np.sort(rows, axis=1)[:, -2:]
    return (top2[:, 1] - top2[:, 0]) < gap


def compare_with_llamacpp(mlb, gguf, ids, tag, lc=None, vocab=VOCAB, kl_max=KL_MAX, tie_gap=TIE_GAP):
    """Runs both (llama.cpp unless lc, its result, is given); returns (passed, summary, llama.cpp's
    result, near-tie rows)."""
    lc = lc or llamacpp(gguf, ids)
    gen = lc["tokens"]
    b = np.array(lc["logits"], dtype=np.float64)
    fed = ids + gen[:-1]
    got = h.dump_logits(ENV, mlb, fed, ENV.path(tag + "_krafla.f32"), ["--kv", "f16"])
    a = cl.load(got, vocab)
    if a.shape != b.shape or not np.isfinite(a).all():
        return False, "shapes %s %s or non-finite logits" % (a.shape, b.shape), lc, None
    rel, same_arg, top, kl, _ = cl.compare(a, b)
    ties = near_ties(b, tie_gap)
    ok = bool((same_arg | ties).all()) and bool((top >= 4).all()) and bool(kl.max() <= kl_max)
    line = ("%s rows=%d max_rel_err=%.3e argmax_agree=%d/%d (near ties %d, disagreeing outside them %d) "
            "top5_min=%d kl_mean=%.3e kl_max=%.3e (<= %g)"
            % ("PASS" if ok else "FAIL", len(a), rel.max(), int(same_arg.sum()), len(a), int(ties.sum()),
               int((~same_arg & ~ties).sum()), int(top.min()), kl.mean(), kl.max(), kl_max))
    return ok, line, lc, ties


# --- a minimal GGUF reader, for the mutations ---------------------------------------------------

def gguf_tensors(path):
    """{name: (dims, type, absolute data offset)} of a GGUF v3 file."""
    data = open(path, "rb").read()
    pos = [0]

    def take(fmt):
        v = struct.unpack_from("<" + fmt, data, pos[0])
        pos[0] += struct.calcsize("<" + fmt)
        return v[0]

    def string():
        n = take("Q")
        s = data[pos[0]:pos[0] + n]
        pos[0] += n
        return s.decode("utf-8", "replace")

    sizes = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take("I"), take("Q")
            return [value(et) for _ in range(n)]
        return take(sizes[t])

    assert take("I") == 0x46554747 and take("I") == 3
    n_t, n_kv = take("Q"), take("Q")
    align = 32
    for _ in range(n_kv):
        k = string()
        v = value(take("I"))
        if k == "general.alignment":
            align = v
    infos = {}
    for _ in range(n_t):
        name = string()
        dims = [take("Q") for _ in range(take("I"))]
        infos[name] = [dims, take("I"), take("Q")]
    start = (pos[0] + align - 1) // align * align
    for v in infos.values():
        v[2] += start
    return infos


def row_bytes(dims, ttype):
    return {0: dims[0] * 4, 8: dims[0] // 32 * 34, 2: dims[0] // 32 * 18}[ttype]


def mutate(src, dst, kind, head_dim):
    buf = bytearray(open(src, "rb").read())
    t = gguf_tensors(src)
    if kind == "gate_up":  # every layer's ffn_gate and ffn_up data swapped
        for name in t:
            if name.endswith("ffn_gate.weight"):
                g, u = t[name], t[name.replace("ffn_gate", "ffn_up")]
                n = row_bytes(g[0], g[1]) * g[0][1]
                buf[g[2]:g[2] + n], buf[u[2]:u[2] + n] = buf[u[2]:u[2] + n], buf[g[2]:g[2] + n]
    elif kind == "rope_half":  # q and k rows of each head reordered to Hugging Face's rotate-half layout
        for name in t:
            if name.endswith("attn_q.weight") or name.endswith("attn_k.weight"):
                dims, ty, off = t[name]
                rb = row_bytes(dims, ty)
                rows = [bytes(buf[off + r * rb: off + (r + 1) * rb]) for r in range(dims[1])]
                out = []
                for hh in range(dims[1] // head_dim):
                    head = rows[hh * head_dim:(hh + 1) * head_dim]
                    out += head[0::2] + head[1::2]
                buf[off:off + rb * dims[1]] = b"".join(out)
    elif kind == "norm_offset":  # every attn_norm weight w stored as 1 + w (Gemma's convention, wrongly)
        for name in t:
            if name.endswith("attn_norm.weight"):
                dims, ty, off = t[name]
                vals = struct.unpack_from("<%df" % dims[0], buf, off)
                struct.pack_into("<%df" % dims[0], buf, off, *[1.0 + v for v in vals])
    else:
        raise ValueError(kind)
    open(dst, "wb").write(bytes(buf))
    return dst


class RandomLlama(unittest.TestCase):
    def check(self, shape, wtype, diverse=True):
        mlb, gguf = make_pair(shape, shape, wtype)
        tag = "%s_%s" % (shape, wtype)
        kl_max, gap = TOLERANCE.get(shape, (KL_MAX, TIE_GAP))
        # llama.cpp on the fixed prompt and the first batch of search prompts, in one process.
        fixed = prompt_ids(seed=1000)
        runs = llamacpp_many(gguf, [fixed] + [prompt_ids(s) for s in range(1, SEARCH_BATCH + 1)])
        # The logits on a fixed prompt, near ties and all.
        ok, line, _, _ = compare_with_llamacpp(mlb, gguf, fixed, tag + "_fixed", runs.pop(0), kl_max=kl_max,
                                               tie_gap=gap)
        print("%s: fixed prompt: %s" % (tag, line))
        self.assertTrue(ok, line)
        # The greedy continuation on the first prompt without a near tie in llama.cpp's run.
        for seed in range(1, SEARCH + 1):
            if seed > len(runs):
                runs += llamacpp_many(gguf, [prompt_ids(s) for s in range(seed, min(seed + SEARCH_BATCH, SEARCH + 1))])
            ids, lc = prompt_ids(seed), runs[seed - 1]
            # (and without BOS or EOS in the continuation, where ml_run stops: llama2.c's rule)
            if not near_ties(np.array(lc["logits"]), gap).any() and not {1, 2} & set(lc["tokens"]):
                break
        else:
            self.fail("no prompt of seeds 1..%d without a near tie (top two within %g)" % (SEARCH, gap))
        ok, line, _, _ = compare_with_llamacpp(mlb, gguf, ids, tag, lc, kl_max=kl_max, tie_gap=gap)
        gen = lc["tokens"]
        print("%s: prompt seed %d, llama.cpp greedy %s\n  logits: %s" % (tag, seed, gen, line))
        self.assertTrue(ok and "argmax_agree=%d/" % (len(ids) + N_GEN - 1) in line, line)
        if diverse:  # (a random tied embedding tends to repeat a token; the logits are compared anyway)
            self.assertGreater(len(set(gen)), 4, "a degenerate continuation tests little: %s" % gen)
        # krafla's own greedy run prints the prompt's and the continuation's pieces.
        text = h.generate(ENV, mlb, ["--tokens", " ".join(map(str, ids)), "-n", N_GEN, "--temp", "0", "--kv", "f16"])
        want = h.run([ENV.exe("ml_tok"), mlb, "decode"], stdin=" ".join(map(str, ids + gen)))[1]
        self.assertEqual(text.rstrip("\n"), want.rstrip("\n"))
        self.assertEqual(len(gen), N_GEN)

    def test_gqa2_q8(self): self.check("gqa2", "q8")
    def test_gqa2_q4(self): self.check("gqa2", "q4")
    def test_gqa4_q8(self): self.check("gqa4", "q8")
    def test_gqa4_q4(self): self.check("gqa4", "q4")
    def test_mqa_hd32_q8(self): self.check("mqa_hd32", "q8")
    def test_mqa_hd32_q4(self): self.check("mqa_hd32", "q4")
    # Hugging Face's rotate-half layout: the GGUF gets q/k rows reordered into llama.cpp's pairs.
    def test_gqa2_half_q8(self): self.check("gqa2_half", "q8")


class Archs(RandomLlama):
    """Every architecture llama.cpp v0.5.0 runs and the writer writes, from its real config.json
    (all six tie the classifier to the embedding), Qwen3.5 included (llama.cpp's qwen35), and
    Gemma 3 once more with its sliding window shortened to 8 positions."""

    def check(self, shape, wtype):
        RandomLlama.check(self, shape, wtype, diverse=False)

    def test_gqa2_q8(self): pass  # (the Llama shapes run in RandomLlama)
    test_gqa2_q4 = test_gqa4_q8 = test_gqa4_q4 = test_mqa_hd32_q8 = test_mqa_hd32_q4 = test_gqa2_half_q8 = test_gqa2_q8

    def test_qwen2_q8(self): self.check("qwen2", "q8")
    def test_qwen2_q4(self): self.check("qwen2", "q4")
    def test_qwen3_q8(self): self.check("qwen3", "q8")
    def test_qwen3_q4(self): self.check("qwen3", "q4")
    def test_gemma3_q8(self): self.check("gemma3", "q8")
    def test_gemma3_q4(self): self.check("gemma3", "q4")
    def test_gemma3_sliding_window_8_q8(self): self.check("gemma3_swa", "q8")
    def test_llama_smollm2_q8(self): self.check("llama_smollm2", "q8")
    def test_llama32_q8(self): self.check("llama32", "q8")
    def test_llama32_q4(self): self.check("llama32", "q4")
    def test_qwen35_q8(self): self.check("qwen35", "q8")
    def test_qwen35_q4(self): self.check("qwen35", "q4")


class Mutations(unittest.TestCase):
    """Each broken GGUF must fail the comparison (logits or greedy tokens)."""

    def check(self, kind):
        for wtype in ("q8", "q4"):
            mlb, gguf = make_pair("gqa2", "gqa2", wtype)
            bad = mutate(gguf, ENV.path("gqa2_%s_%s.gguf" % (wtype, kind)), kind, head_dim=32)
            ok, line, _, _ = compare_with_llamacpp(mlb, bad, prompt_ids(seed=1000), "mut_%s_%s" % (kind, wtype))
            print("%s %s (must fail): %s" % (kind, wtype, line))
            self.assertFalse(ok, "%s went unnoticed: %s" % (kind, line))

    def test_gate_up_swapped(self): self.check("gate_up")
    def test_rope_half_layout(self): self.check("rope_half")
    def test_norm_offset(self): self.check("norm_offset")


class Refusals(unittest.TestCase):
    """--gguf refuses what llama.cpp would run differently, before writing anything."""

    def expect(self, extra, msg):
        out = ENV.path("refused.gguf")
        if os.path.exists(out):
            os.remove(out)
        rc, _, err = h.run([ENV.exe("ml_convert"), "random"] + SHAPES["gqa2"] +
                           ["--vocab", VOCAB, "--max-seq", 64, "-o", ENV.path("refused.mlb"), "--gguf", out] + extra,
                           check=False)
        self.assertEqual(rc, 2, err)
        self.assertIn(msg, err)
        self.assertFalse(os.path.exists(out))

    def test_f32_scales(self): self.expect([], "--scales f16")


class RealGguf(unittest.TestCase):
    """llama-2-tiny-random.gguf: llama.cpp's greedy tokens, and krafla's through ml_convert gguf."""

    def test_llama2_tiny_random(self):
        gguf = ENV.shared_path("models/llama-2-tiny-random-gguf/llama-2-tiny-random.gguf")
        ids = [1, 450, 4996, 17354, 1701, 432, 17204, 975, 278, 17366, 11203]
        a = llamacpp(gguf, ids, logits=False)["tokens"]
        b = llamacpp(gguf, ids, logits=False)["tokens"]
        print("llama.cpp greedy:", a)
        self.assertEqual(a, b)
        rc, out, _ = h.run([ENV.exe("ml_convert"), "--help"], check=False)
        if " gguf" not in out:
            self.skipTest("ml_convert has no gguf subcommand yet")
        mlb = ENV.path("llama2_tiny_random.mlb")
        h.run([ENV.exe("ml_convert"), "gguf", gguf, "-o", mlb])
        text = h.generate(ENV, mlb, ["--tokens", " ".join(map(str, ids)), "-n", N_GEN, "--temp", "0", "--kv", "f16"])
        stop = [i for i, t in enumerate(a) if t in (1, 2)]  # ml_run stops at BOS or EOS
        until = a[:stop[0]] if stop else a
        want = h.run([ENV.exe("ml_tok"), mlb, "decode"], stdin=" ".join(map(str, ids + until)))[1]
        self.assertEqual(text.rstrip("\n"), want.rstrip("\n"))
        self.assertEqual(len(until), N_GEN)
        ok, line, _, _ = compare_with_llamacpp(mlb, gguf, ids, "llama2_tiny_random", vocab=32000)
        print("logits:", line)
        self.assertTrue(ok, line)


class Roundtrip(unittest.TestCase):
    """The writer against the other side's reader: `ml_convert gguf` of a `--gguf` file gives back the
    model, so its logits are bit-identical to the .mlb's (Q8_0/Q4_0 copied both ways); a Llama from a
    Hugging Face config comes back in the interleaved layout (q/k reordered), equal up to float
    summation order."""

    def check(self, shape, wtype, exact=True):
        rc, out, _ = h.run([ENV.exe("ml_convert"), "--help"], check=False)
        if " gguf" not in out:
            self.skipTest("ml_convert has no gguf subcommand yet")
        mlb, gguf = make_pair(shape, shape, wtype)
        back = ENV.path("%s_%s_back.mlb" % (shape, wtype))
        h.run([ENV.exe("ml_convert"), "gguf", gguf, "-o", back])
        ids = prompt_ids(seed=1000)
        a = cl.load(h.dump_logits(ENV, mlb, ids, ENV.path("rt_a.f32")), VOCAB)
        # The converted .mlb, and the GGUF opened directly by ml_run (converted in memory at load).
        for other in (back, gguf):
            b = cl.load(h.dump_logits(ENV, other, ids, ENV.path("rt_b.f32")), VOCAB)
            if exact:
                self.assertTrue((a == b).all(), "%s: max |a-b| %g" % (other, np.abs(a - b).max()))
            else:
                rel = cl.compare(b, a)[0]
                self.assertLess(rel.max(), 1e-5, other)

    def test_llama_q8(self): self.check("gqa2", "q8")
    def test_llama_q4(self): self.check("gqa2", "q4")
    def test_qwen2_q8(self): self.check("qwen2", "q8")
    def test_qwen3_q4(self): self.check("qwen3", "q4")
    def test_gemma3_q8(self): self.check("gemma3", "q8")
    # Qwen3.5: attn_q's merged query and gate split again, the gated-delta tensors and the ssm_*,
    # full_attention_interval and M-RoPE keys back into the header.
    def test_qwen35_q8(self): self.check("qwen35", "q8")
    def test_qwen35_q4(self): self.check("qwen35", "q4")
    def test_llama_half_q8(self): self.check("llama_smollm2", "q8", exact=False)


class Stories260K(unittest.TestCase):
    """The driver itself: stories260K.gguf from BOS gives the greedy ids shared/models/SOURCES.md records."""

    def test_from_bos(self):
        got = llamacpp(ENV.shared_path("models/stories260K-gguf/stories260K.gguf"), [1], n=16, logits=False)["tokens"]
        self.assertEqual(got, [403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338])


def main():
    global ENV, NODE
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--shared", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--node", default="node")
    ap.add_argument("-k", dest="pattern", default=None, help="run only the tests whose name contains this")
    a = ap.parse_args()
    ENV = h.Env(a.bin, a.bin, a.shared, a.work)
    NODE = a.node
    if not os.path.exists(os.path.join(HERE, "node_modules", "node-llama-cpp", "package.json")):
        print("SKIP (llama.cpp): e2e/llamacpp/node_modules is missing (scripts/install-deps runs npm ci there)")
        sys.exit(0)
    h.skip_if_cpu_lacks_isa(ENV)
    suite = unittest.TestSuite()
    for cls in (Stories260K, RandomLlama, Archs, Refusals, Mutations, RealGguf, Roundtrip):
        for t in unittest.defaultTestLoader.loadTestsFromTestCase(cls):
            if a.pattern is None or a.pattern in t.id():
                suite.addTest(t)
    result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
