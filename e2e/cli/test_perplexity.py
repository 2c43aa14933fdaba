"""ml_perplexity against two oracles, computed here from their logits with llama-perplexity's rules
(chunks of ctx tokens, the chunk's first token replaced by the tokenizer's start token, the second
half scored, PPL = exp(mean NLL), +/- PPL * the standard error of the mean NLL):

  ref    tools/ref_forward's logits (double precision, krafla's Q8 activation rule) on the same
         .mlb: stories260K Q8/Q4 with every KV type, tinystories-656k-hf (its folder and its .mlb),
         random Qwen3, Gemma 3 and Qwen3.5 models on token ids (--ids); within 1% (measured: ~1e-6).
         Also: the output is byte-identical for -t 1/2 and any --batch (chunks in one batch or
         one at a time).
  llamacpp  llama.cpp (node-llama-cpp, e2e/llamacpp/llamacpp_run.mjs --logits) on
         stories260K.gguf (F32), against ml_perplexity on the same file (converted to Q8 at load):
         within 1%; and llama.cpp's F32 figure against ref_forward's float64 one on
         stories260K.bin (the same weights) within 0.1%. Prints "SKIP (llama.cpp)" without
         e2e/llamacpp/node_modules.
  cli    bad input: exit codes and messages.

Usage: test_perplexity.py GROUP --bin DIR --ref-bin DIR --shared DIR --work DIR [--node NODE]
"""
import argparse
import json
import math
import os
import random
import struct
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness as h  # noqa: E402
import test_run  # noqa: E402

ENV = None
NODE = "node"
STORY = os.path.join(HERE, "..", "perplexity", "story.txt")
DRIVER = os.path.join(HERE, "..", "llamacpp", "llamacpp_run.mjs")
TOL = 0.01  # the bound: within 1% of the oracle's perplexity


def ppl(model, text, *extra, check=True):
    """ml_perplexity --json: the parsed object (or (code, stdout, stderr) when check is False)."""
    p = h.run([ENV.exe("ml_perplexity"), model, text, "--json"] + [str(a) for a in extra], check=check)
    return json.loads(p[1]) if check else p


def read_rows(path, vocab):
    with open(path, "rb") as f:
        data = f.read()
    n = len(data) // (4 * vocab)
    return [struct.unpack_from("<%df" % vocab, data, 4 * vocab * i) for i in range(n)]


def nll_of(row, target):
    m = max(row)
    return math.log(math.fsum(math.exp(v - m) for v in row)) - (row[target] - m)


def oracle_ppl(tokens, ctx, start, logits_of, chunks=0):
    """llama-perplexity's figure from logits_of(chunk ids) -> rows: (ppl, ppl_stderr, scored)."""
    n = len(tokens) // ctx
    if chunks:
        n = min(n, chunks)
    first = ctx // 2
    nlls = []
    for c in range(n):
        ids = list(tokens[c * ctx:(c + 1) * ctx])
        if start >= 0:
            ids[0] = start
        rows = logits_of(ids)
        for j in range(first, ctx - 1):
            nlls.append(nll_of(rows[j], tokens[c * ctx + j + 1]))
    mean = math.fsum(nlls) / len(nlls)
    var = math.fsum(x * x for x in nlls) / len(nlls) - mean * mean
    se = math.sqrt(var / (len(nlls) - 1))
    return math.exp(mean), math.exp(mean) * se, len(nlls)


def ref_rows(model, vocab, kv, tag):
    def f(ids):
        out = ENV.path("ppl_ref_%s.bin" % tag)
        h.run([ENV.exe("ref_forward", ref=True), model, "--tokens", " ".join(map(str, ids)), "--kv", kv,
               "--dump-logits", out])
        return read_rows(out, vocab)
    return f


def encode(model, text):
    """The text's ids as the tokenizer gives them with its special tokens (ml_tok --add-special)."""
    out = h.run([ENV.exe("ml_tok", ref=True), model, "encode", "--add-special", "--", text])[1]
    return [int(t) for t in out.split()]


def start_token(model):
    ids = encode(model, "")
    return ids[0] if len(ids) == 1 else -1


def rel(a, b):
    return abs(a - b) / b


class Ref(unittest.TestCase):
    """ml_perplexity equals the perplexity computed from ref_forward's logits within 1%."""

    def check(self, model, vocab, ctx, kv="f32", ref_model=None, tag="", chunks=0):
        with open(STORY, encoding="utf-8") as f:
            text = f.read()
        tokens = encode(model, text)
        start = start_token(model)
        extra = ["--ctx", ctx, "--kv", kv] + (["--chunks", chunks] if chunks else [])
        got = ppl(model, STORY, *extra)
        self.assertEqual(got["tokens"], len(tokens))
        self.assertEqual(got["chunk_start"], start)
        want, want_se, scored = oracle_ppl(tokens, ctx, start, ref_rows(ref_model or model, vocab, kv, tag), chunks)
        self.assertEqual(got["scored"], scored)
        print("%s kv %s ctx %d: ml_perplexity %.6f +/- %.5f, ref_forward %.6f +/- %.5f (rel %.2g), %d tokens scored"
              % (tag, kv, ctx, got["ppl"], got["ppl_stderr"], want, want_se, rel(got["ppl"], want), scored))
        self.assertLess(rel(got["ppl"], want), TOL)
        self.assertLess(rel(got["ppl_stderr"], want_se), TOL)
        return got

    def test_stories260k(self):
        for wtype in ("q8", "q4"):
            m = h.stories260k(ENV, wtype)
            for kv in ("f32", "q8", "f16"):
                with self.subTest(wtype=wtype, kv=kv):  # the KV types on the first 4 chunks (fewer oracle runs)
                    self.check(m, 512, 64, kv, tag="stories260K_%s" % wtype, chunks=0 if kv == "f32" else 4)

    def test_stories260k_ctx128(self):
        self.check(h.stories260k(ENV, "q8"), 512, 128, tag="stories260K_q8")

    def test_tinystories_656k_hf(self):
        folder = ENV.shared_path("models/tinystories-656k-hf")
        mlb = ENV.path("ppl_ts656k.mlb")
        if not os.path.exists(mlb):
            h.run([ENV.exe("ml_convert", ref=True), "hf", folder, "-o", mlb])
        got = self.check(mlb, 2048, 64, tag="tinystories-656k-hf")
        # The folder, converted at load, gives the .mlb's figures exactly.
        direct = ppl(folder, STORY, "--ctx", 64)
        for k in ("ppl", "ppl_stderr", "chunk_ppl", "tokens", "chunk_start"):
            self.assertEqual(direct[k], got[k], k)

    def test_random_archs_on_ids(self):
        # Random models from real configs (test_run.py's small shapes), scored on random ids (--ids: chunks verbatim).
        for arch in ("qwen3", "gemma3", "qwen35"):
            with self.subTest(arch=arch):
                m = test_run.arch_model(ENV, arch)
                r = random.Random(3)
                ids = [r.randrange(256) for _ in range(100)]
                path = ENV.path("ppl_%s_ids.txt" % arch)
                with open(path, "w") as f:
                    f.write(" ".join(map(str, ids)))
                got = ppl(m, path, "--ids", "--ctx", 32)
                want, want_se, scored = oracle_ppl(ids, 32, -1, ref_rows(m, 256, "f32", arch))
                print("%s ids ctx 32: ml_perplexity %.6f +/- %.5f, ref_forward %.6f (rel %.2g)"
                      % (arch, got["ppl"], got["ppl_stderr"], want, rel(got["ppl"], want)))
                self.assertEqual((got["scored"], got["chunk_start"]), (scored, -1))
                self.assertLess(rel(got["ppl"], want), TOL)
                self.assertLess(rel(got["ppl_stderr"], want_se), TOL)

    def test_same_output_for_threads_and_batches(self):
        m = h.stories260k(ENV, "q4")
        base = h.run([ENV.exe("ml_perplexity"), m, STORY, "--ctx", "32", "--json"])[1]
        text = h.run([ENV.exe("ml_perplexity"), m, STORY, "--ctx", "32"])[1]
        for extra in (["-t", "2"], ["--batch", "7"], ["-t", "2", "--batch", "32"], ["--batch", "100", "-t", "3"]):
            with self.subTest(extra=extra):
                self.assertEqual(h.run([ENV.exe("ml_perplexity"), m, STORY, "--ctx", "32", "--json"] + extra)[1], base)
                self.assertEqual(h.run([ENV.exe("ml_perplexity"), m, STORY, "--ctx", "32"] + extra)[1], text)
        # --chunks K gives the first K chunks' figures.
        j, j2 = json.loads(base), ppl(m, STORY, "--ctx", 32, "--chunks", 2)
        self.assertEqual(j2["chunk_ppl"], j["chunk_ppl"][:2])
        self.assertIn("PPL = %.4f +/- %.5f" % (j["ppl"], j["ppl_stderr"]), text)


def llamacpp_ppl(test, gguf, tokens, ctx, start, kv="f32"):
    """llama.cpp's perplexity on the chunks of tokens: one driver run feeds every chunk, each from an
    empty sequence (llamacpp_run.mjs --chunk), the chunks as oracle_ppl cuts them."""
    n = len(tokens) // ctx
    fed = []
    for c in range(n):
        ids = list(tokens[c * ctx:(c + 1) * ctx])
        if start >= 0:
            ids[0] = start
        fed += ids
    out = h.run([NODE, DRIVER, gguf, "--tokens", " ".join(map(str, fed)), "--chunk", ctx, "--kv", kv])[1]
    rows = json.loads(out)["logits"]
    test.assertEqual(len(rows), len(fed))
    calls = []

    def llama_rows(ids):  # oracle_ppl asks for the chunks in order
        c = len(calls)
        calls.append(c)
        test.assertEqual(ids, fed[c * ctx:(c + 1) * ctx])
        return rows[c * ctx:(c + 1) * ctx]

    return oracle_ppl(tokens, ctx, start, llama_rows)


class LlamaCpp(unittest.TestCase):
    """ml_perplexity against the perplexity computed from llama.cpp's logits, within 1%."""

    def test_stories260k_gguf(self):
        # The real file is F32: llama.cpp runs it in float (its figure equals ref_forward's float64
        # one on stories260K.bin, the same weights), krafla converts it to Q8 at load, whose rounding
        # moves the perplexity by ~0.3% (ml_perplexity on the .mlb equals ref_forward on it to ~1e-4).
        gguf = ENV.shared_path("models/stories260K-gguf/stories260K.gguf")
        with open(STORY, encoding="utf-8") as f:
            tokens = encode(gguf, f.read())
        start, ctx = start_token(gguf), 64
        lc, lc_se, scored = llamacpp_ppl(self, gguf, tokens, ctx, start)
        fl, _, _ = oracle_ppl(tokens, ctx, start, ref_rows(ENV.shared_path("models/stories260K.bin"), 512, "f64", "float"))
        got = ppl(gguf, STORY, "--ctx", ctx)
        print("stories260K.gguf ctx %d, %d tokens scored: ml_perplexity (Q8 at load) %.6f +/- %.5f, llama.cpp (F32) "
              "%.6f +/- %.5f (rel %.2g); ref_forward float64 on stories260K.bin %.6f (llama.cpp rel %.2g)"
              % (ctx, scored, got["ppl"], got["ppl_stderr"], lc, lc_se, rel(got["ppl"], lc), fl, rel(lc, fl)))
        self.assertEqual(got["scored"], scored)
        self.assertLess(rel(got["ppl"], lc), TOL)
        self.assertLess(rel(got["ppl_stderr"], lc_se), TOL)
        self.assertLess(rel(lc, fl), 1e-3)

    def test_random_q8_q4_gguf(self):
        # Quantized on both sides: `ml_convert random --gguf` writes the same Q8_0/Q4_0 weights for
        # both engines (f16 scales), tok512's vocabulary, the story text; llama.cpp's f16 KV cache
        # against krafla's --kv f16.
        for wtype in ("q8", "q4"):
            with self.subTest(wtype=wtype):
                mlb, gguf = ENV.path("ppl_rand_%s.mlb" % wtype), ENV.path("ppl_rand_%s.gguf" % wtype)
                if not os.path.exists(gguf):
                    h.run([ENV.exe("ml_convert", ref=True), "random", "--dim", 128, "--hidden", 384, "--layers", 3,
                           "--heads", 4, "--kv-heads", 2, "--vocab", 512, "--max-seq", 256, "--seed", 1,
                           "--wtype", wtype, "--scales", "f16", "--tokenizer", ENV.shared_path("models/tok512.bin"),
                           "-o", mlb, "--gguf", gguf])
                with open(STORY, encoding="utf-8") as f:
                    tokens = encode(mlb, f.read())
                lc, lc_se, scored = llamacpp_ppl(self, gguf, tokens, 64, start_token(mlb), kv="f16")
                got = ppl(mlb, STORY, "--ctx", 64, "--kv", "f16")
                print("random %s: ml_perplexity %.6f +/- %.5f, llama.cpp %.6f +/- %.5f (rel %.2g), %d tokens scored"
                      % (wtype, got["ppl"], got["ppl_stderr"], lc, lc_se, rel(got["ppl"], lc), scored))
                self.assertEqual(got["scored"], scored)
                self.assertLess(rel(got["ppl"], lc), TOL)


class Cli(unittest.TestCase):
    """Bad input: exit 2 (usage, input) or 1 (a file that cannot be read), naming the problem."""

    def expect(self, args, code, needle):
        rc, out, err = h.run([ENV.exe("ml_perplexity")] + [str(a) for a in args], check=False)
        self.assertEqual(rc, code, (args, out, err))
        self.assertIn(needle, err, (args, err))

    def test_bad_input(self):
        m = h.stories260k(ENV, "q8")
        short = ENV.path("ppl_short.txt")
        with open(short, "w") as f:
            f.write("Once upon a time")
        ids = ENV.path("ppl_bad_ids.txt")
        with open(ids, "w") as f:
            f.write("1 2 x")
        far = ENV.path("ppl_far_ids.txt")
        with open(far, "w") as f:
            f.write("1 2 512")
        bare = h.random_model(ENV, "ppl_no_tok.mlb")
        self.expect([m, short], 2, "fewer than one chunk of --ctx 512")
        self.expect([m, STORY, "--ctx", "4096"], 2, "--ctx 4096: ")
        self.expect([m, STORY, "--ctx", "2"], 2, "--ctx")
        self.expect([m, STORY, "--chunks", "-1"], 2, "--chunks")
        self.expect([m, STORY, "--kv", "q4"], 2, "--kv")
        self.expect([m, ENV.path("no-such.txt")], 1, "no-such.txt: cannot read the text")
        self.expect([ENV.path("no-such.mlb"), STORY], 1, "no-such.mlb")
        self.expect([m, ENV.work], 2, "not a regular file")
        self.expect([m, ids, "--ids"], 2, "'x' is not a token id")
        self.expect([m, far, "--ids", "--ctx", "3"], 2, "id 512 is outside the vocabulary")
        self.expect([bare, STORY], 2, "no tokenizer")
        self.expect([m], 2, "text")


def main():
    global ENV, NODE
    ap = argparse.ArgumentParser()
    ap.add_argument("group", choices=["ref", "llamacpp", "cli"])
    ap.add_argument("--node", default="node")
    ENV, a = h.env_from_args(ap, ref_bin=True)
    NODE = a.node
    h.skip_if_cpu_lacks_isa(ENV)
    if a.group == "llamacpp":
        if not os.path.isdir(os.path.join(os.path.dirname(DRIVER), "node_modules", "node-llama-cpp")):
            print("SKIP (llama.cpp): e2e/llamacpp/node_modules is not installed (scripts/install-deps)")
            return
        h.run_cases(LlamaCpp)
    h.run_cases({"ref": Ref, "cli": Cli}[a.group])


if __name__ == "__main__":
    main()
