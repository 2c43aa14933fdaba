"""End-to-end checks of ml_run: logits against the oracle (tools/ref_forward), the KV cache types,
the real stories260K model, text equality with the scalar build, and every CLI edge case.

Usage: test_run.py GROUP --bin DIR --ref-bin DIR --shared DIR --work DIR
GROUP: logits | kv | real | story | cli | same-as-scalar | archs | ...
"""
import argparse
import os
import random
import stat
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

ENV = None
VOCAB = 256
QUICK = bool(os.environ.get("KRAFLA_E2E_QUICK"))


def ids_for(n, vocab=VOCAB, seed=7):
    r = random.Random(seed)
    return [1] + [r.randrange(vocab) for _ in range(n - 1)]


class Logits(unittest.TestCase):
    """Random Q8 and Q4 models: ml_run's logits equal ref_forward's within 1e-3 relative, with the
    same argmax at every position."""

    def check(self, wtype, scales):
        m = h.random_model(ENV, "rand_%s_%s.mlb" % (wtype, scales), wtype=wtype, scales=scales)
        ids = ids_for(24)
        a = h.dump_logits(ENV, m, ids, ENV.path("run_%s_%s.bin" % (wtype, scales)))
        b = h.ref_logits(ENV, m, ids, ENV.path("ref_%s_%s.bin" % (wtype, scales)))
        ok, line = h.compare(ENV, a, b, VOCAB, "--rtol", "1e-3", "--ties", b + ".ties")
        print(wtype, scales, line)
        self.assertTrue(ok, line)

    def test_q8_f32(self): self.check("q8", "f32")
    def test_q4_f32(self): self.check("q4", "f32")
    def test_q8_f16(self): self.check("q8", "f16")
    def test_q4_f16(self): self.check("q4", "f16")

    def test_shorter_ctx_gives_the_same_logits(self):
        m = h.random_model(ENV, "rand_q8_f32.mlb")
        ids = ids_for(20)
        a = h.dump_logits(ENV, m, ids, ENV.path("ctx_full.bin"))
        b = h.dump_logits(ENV, m, ids, ENV.path("ctx_20.bin"), ["--ctx", "20"])
        with open(a, "rb") as fa, open(b, "rb") as fb:
            self.assertEqual(fa.read(), fb.read())

    def test_long_context_crosses_attention_blocks(self):
        # 150 positions on a 160-position model, so attention spans several 64-position blocks.
        m = h.random_model(ENV, "rand_q4_f32.mlb", wtype="q4")
        ids = ids_for(150, seed=11)
        a = h.dump_logits(ENV, m, ids, ENV.path("long_run.bin"))
        b = h.ref_logits(ENV, m, ids, ENV.path("long_ref.bin"))
        ok, line = h.compare(ENV, a, b, VOCAB, "--rtol", "1e-3", "--ties", b + ".ties")
        print("long", line)
        self.assertTrue(ok, line)


class Kv(unittest.TestCase):
    """--kv q8 and --kv f16 against the reference emulating the same cache, under the KL criterion."""

    def check(self, kv, wtype):
        m = h.random_model(ENV, "rand_%s_f32.mlb" % wtype, wtype=wtype)
        ids = ids_for(40, seed=3)
        a = h.dump_logits(ENV, m, ids, ENV.path("kv_%s_%s_run.bin" % (kv, wtype)), ["--kv", kv])
        b = h.ref_logits(ENV, m, ids, ENV.path("kv_%s_%s_ref.bin" % (kv, wtype)), kv=kv)
        ok, line = h.compare(ENV, a, b, VOCAB, "--kl", "1e-2")
        print(kv, wtype, line)
        self.assertTrue(ok, line)

    def test_q8_cache_q8_model(self): self.check("q8", "q8")
    def test_f16_cache_q8_model(self): self.check("f16", "q8")
    def test_q8_cache_q4_model(self): self.check("q8", "q4")
    def test_f16_cache_q4_model(self): self.check("f16", "q4")


# Real Hugging Face configs (../shared/data/hf) whose architectures the archs group runs.
ARCH_CONFIGS = {
    "llama3": "llama-3.2-1b-instruct/config.json",
    "qwen2": "qwen2.5-0.5b-instruct/config.json",
    "qwen3": "qwen3-0.6b/config.json",
    "gemma3": "gemma-3-1b-it/config.json",
    "qwen35": "qwen3.5-0.8b/config.reconstructed.json",
    "smollm2": "smollm2-135m-instruct/config.json",
}


def small_config(env, arch):
    """The real config of arch with every architectural key kept and the sizes made small (the
    windows, the Llama 3 scaling band and the hybrid period too, so each takes effect within 16
    positions): the strict 1e-3 check needs narrow layers, where a float/double difference seldom
    moves a Q8 rounding."""
    import json
    with open(env.shared_path("data/hf/" + ARCH_CONFIGS[arch])) as f:
        c = json.load(f)
    t = c.get("text_config", c)
    t.update({"hidden_size": 128, "intermediate_size": 160, "num_attention_heads": 4, "num_key_value_heads": 2,
              "max_position_embeddings": 256})
    t["num_hidden_layers"] = 4
    if "head_dim" in t:
        t["head_dim"] = 64  # != hidden / heads, as in Qwen3, Gemma 3 and Qwen3.5
    if t.get("rope_scaling"):
        t["rope_scaling"]["original_max_position_embeddings"] = 16
    if "sliding_window" in t:
        t["sliding_window"] = 5
        t["sliding_window_pattern"] = 2
    if "layer_types" in t:
        t["layer_types"] = ["linear_attention", "full_attention"] * 2
        t["full_attention_interval"] = 2
    if "linear_num_key_heads" in t:
        t.update({"linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16,
                  "linear_value_head_dim": 16})
    out = env.path("small_%s.json" % arch)
    with open(out, "w") as f:
        json.dump(c, f)
    return out


def arch_model(env, arch, wtype="q8", shape="small"):
    """A random model of arch: its small config, or the real shape cut to 2 layers and 512 tokens."""
    out = env.path("arch_%s_%s_%s.mlb" % (arch, shape, wtype))
    if not os.path.exists(out):
        if shape == "small":
            args = ["--config", small_config(env, arch), "--vocab", "256"]
        else:
            args = ["--config", env.shared_path("data/hf/" + ARCH_CONFIGS[arch]), "--layers", "2", "--vocab", "512"]
        h.run([env.exe("ml_convert", ref=True), "random"] + args + ["--seed", "3", "--wtype", wtype, "-o", out])
    return out


class Archs(unittest.TestCase):
    """Every architecture (Llama 3 with its RoPE scaling, Qwen2.5, Qwen3, Gemma 3, the Qwen3.5
    hybrid, SmolLM2) on random models from real configs: against ref_forward within 1e-3 on small
    widths (Q8 and Q4, packed and row-major, 16 positions; 150 for the long-context rule), with the
    q8 and f16 KV caches under the KL criterion, and at the real widths (2 layers) under the KL
    criterion, as for real models: a layer thousands wide all but surely has some activation that
    float and double round to different Q8 values."""

    def check(self, arch, wtype="q8", extra=(), n=16, kv="f32", crit=("--rtol", "1e-3")):
        m = arch_model(ENV, arch, wtype)
        ids = ids_for(n, vocab=256, seed=5)
        tag = "%s_%s_%s_%d_%s" % (arch, wtype, kv, n, "_".join(extra).replace("-", ""))
        a = h.dump_logits(ENV, m, ids, ENV.path("archs_%s_run.bin" % tag), list(extra) + ["--kv", kv])
        b = h.ref_logits(ENV, m, ids, ENV.path("archs_%s_ref.bin" % tag), kv=kv)
        flags = list(crit) + (["--ties", b + ".ties"] if crit == ("--rtol", "1e-3") else [])
        ok, line = h.compare(ENV, a, b, 256, *flags)
        print(arch, wtype, kv, n, " ".join(extra), line)
        self.assertTrue(ok, line)

    def test_q8(self):
        for arch in ARCH_CONFIGS:
            with self.subTest(arch=arch):
                self.check(arch)

    def test_q4_row_major(self):
        if QUICK:
            self.skipTest("quick mode: q8 packed only")
        for arch in ARCH_CONFIGS:
            with self.subTest(arch=arch):
                self.check(arch, "q4", ["--no-pack"])

    def test_kv_caches(self):
        if QUICK:
            self.skipTest("quick mode: q8 packed only")
        for arch in ARCH_CONFIGS:
            for kv in ("q8", "f16"):
                with self.subTest(arch=arch, kv=kv):
                    self.check(arch, kv=kv, n=24, crit=("--kl", "1e-2"))

    def test_long_context(self):
        # The long-context rule of spec/testing.txt for a build under test: 5% without the argmax
        # check. Over 150 positions a float/double difference a little above float32 rounding
        # (which the near-tie flags do not mark) moves some Q8 rounding and drifts the logits
        # by up to 2%, the recurrent state's most of all; a wrong block, window or state garbles them.
        if QUICK:
            self.skipTest("quick mode: q8 packed only")
        for arch in ARCH_CONFIGS:
            with self.subTest(arch=arch):
                self.check(arch, "q4", n=150, crit=("--rtol", "5e-2", "--any-argmax"))

    def test_real_shapes(self):
        if QUICK:
            self.skipTest("quick mode: the real widths are slow under emulation")
        for arch in ARCH_CONFIGS:
            with self.subTest(arch=arch):
                m = arch_model(ENV, arch, "q8", shape="real")
                ids = ids_for(6, vocab=512, seed=9)
                a = h.dump_logits(ENV, m, ids, ENV.path("archs_real_%s_run.bin" % arch))
                b = h.ref_logits(ENV, m, ids, ENV.path("archs_real_%s_ref.bin" % arch))
                ok, line = h.compare(ENV, a, b, 512, "--kl", "1e-2")
                print(arch, "real shape", line)
                self.assertTrue(ok, line)


STORY_TEXT = ("Once upon a time, there was a little girl named Lily. She loved to play outside in the park. "
              "One day, she saw a big, red ball. She wanted to play with it, but it was too high. "
              "Lily asked her mom to help her. Her mom said, \"Let's try to get it down.\" They worked together "
              "and got the ball. Lily was very happy and said thank you to her mom.")


class Real(unittest.TestCase):
    """stories260K converted to Q8 and Q4 matches ref_forward on the same file under the KL criterion
    over a 100-token prompt."""

    def check(self, wtype, scales="f32"):
        m = h.stories260k(ENV, wtype, scales)
        ids = h.encode(ENV, m, STORY_TEXT)
        ids = ([1] + ids)[:100]
        self.assertEqual(len(ids), 100, "the prompt text must encode to at least 99 tokens")
        a = h.dump_logits(ENV, m, ids, ENV.path("s260_%s_run.bin" % wtype))
        b = h.ref_logits(ENV, m, ids, ENV.path("s260_%s_ref.bin" % wtype))
        ok, line = h.compare(ENV, a, b, 512, "--kl", "1e-2")
        print("stories260K", wtype, scales, line)
        self.assertTrue(ok, line)

    def test_q8(self): self.check("q8")
    def test_q4(self): self.check("q4")
    def test_q8_f16_scales(self): self.check("q8", "f16")


class Story(unittest.TestCase):
    """The greedy story from "Once upon a time" reads as the float checkpoint's own greedy story."""

    def test_q8_greedy_story_follows_the_float_checkpoint(self):
        m = h.stories260k(ENV, "q8")
        text = h.generate(ENV, m, ["-p", "Once upon a time", "--temp", "0", "-n", "120"])
        print(text)
        prompt = [1] + h.encode(ENV, m, "Once upon a time")
        code, out, err = h.run([ENV.exe("ref_forward", ref=True), ENV.shared_path("models/stories260K.bin"),
                                "--tokens", " ".join(map(str, prompt)), "--generate", "120"])
        float_ids = [int(t) for t in out.split()]
        float_text = h.run([ENV.exe("ml_tok", ref=True), m, "decode"], stdin=" ".join(map(str, float_ids[1:])))[1]
        print("float checkpoint:", float_text)
        # The Q8 model's story must start exactly like the float model's (quantization may make them
        # part later) and be the story SOURCES.md records for the real llama2.c run.
        self.assertTrue(text.startswith("Once upon a time, there was a little girl named Lily."), text)
        self.assertTrue(float_text.startswith("Once upon a time, there was a little girl named Lily."), float_text)
        common = 0
        for a, b in zip(text, float_text):
            if a != b:
                break
            common += 1
        print("common prefix with the float checkpoint: %d characters" % common)
        self.assertGreaterEqual(common, 100)


class Cli(unittest.TestCase):
    """Malformed options exit 2 naming the option; --help exits 0; the context limit stops
    generation with a message."""

    def model(self):
        return h.stories260k(ENV, "q8")

    def expect(self, args, code, needle, stdin=None):
        rc, out, err = h.run([ENV.exe("ml_run")] + args, check=False, stdin=stdin)
        self.assertEqual(rc, code, "args %s: stdout %r stderr %r" % (args, out[-500:], err[-500:]))
        if needle:
            self.assertIn(needle, out + err, "args %s" % args)
        return out, err

    def test_help(self):
        out, _ = self.expect(["--help"], 0, "--dump-logits")
        self.assertIn("--kv", out)

    def test_bad_number(self): self.expect([self.model(), "-n", "5x"], 2, "--steps: '5x' is not a decimal integer")
    def test_nan_temperature(self): self.expect([self.model(), "--temp", "nan"], 2, "--temp")
    def test_negative_temperature(self): self.expect([self.model(), "--temp", "-1"], 2, "--temp")
    def test_top_p_out_of_range(self): self.expect([self.model(), "--top-p", "1.5"], 2, "--top-p")
    def test_min_p_out_of_range(self): self.expect([self.model(), "--min-p", "1"], 2, "--min-p")
    def test_presence_penalty_out_of_range(self):
        self.expect([self.model(), "--presence-penalty", "2.5"], 2, "--presence-penalty")
    def test_frequency_penalty_nan(self):
        self.expect([self.model(), "--frequency-penalty", "nan"], 2, "--frequency-penalty")
    def test_bad_kv(self): self.expect([self.model(), "--kv", "q3"], 2, "--kv")
    def test_token_out_of_range(self): self.expect([self.model(), "--tokens", "1 512"], 2, "512")
    def test_negative_token(self): self.expect([self.model(), "--tokens", "1 -3"], 2, "-3")
    def test_token_not_a_number(self): self.expect([self.model(), "--tokens", "1 2x"], 2, "2x")
    def test_ctx_above_max_seq(self): self.expect([self.model(), "--ctx", "513"], 2, "513")
    def test_zero_threads(self): self.expect([self.model(), "-t", "0"], 2, "-t")
    def test_unknown_option(self): self.expect([self.model(), "--frobnicate"], 2, "frobnicate")
    def test_missing_model(self): self.expect([ENV.path("no_such.mlb")], 1, "no_such.mlb")

    def test_dump_logits_longer_than_context(self):
        self.expect([self.model(), "--ctx", "4", "--tokens", "1 2 3 4 5", "--dump-logits", ENV.path("x.bin")], 2,
                    "context")

    def test_corrupt_model(self):
        bad = ENV.path("corrupt.mlb")
        with open(self.model(), "rb") as f:
            data = bytearray(f.read())
        data[20:24] = (48).to_bytes(4, "little")  # dim 48
        with open(bad, "wb") as f:
            f.write(data)
        self.expect([bad], 2, "dim 48")

    def test_not_a_model(self): self.expect([ENV.shared_path("models/tok512.bin")], 2, "magic")

    def test_context_limit_stops_generation(self):
        out, err = self.expect([self.model(), "--ctx", "10", "-n", "50", "--temp", "0", "-p", "Once upon a time"], 0,
                               "context limit")
        self.assertIn("tok/s", err)

    def test_penalties_and_min_p(self):
        """The penalties change greedy text (stories repeat themselves), the same way every run;
        min-p changes sampled text."""
        base = [self.model(), "-p", "Once", "--temp", "0", "-n", "80"]
        penalties = ["--presence-penalty", "1.5", "--frequency-penalty", "0.5"]
        plain = h.generate(ENV, base[0], base[1:])
        pen = h.generate(ENV, base[0], base[1:] + penalties)
        self.assertNotEqual(plain, pen)
        self.assertEqual(pen, h.generate(ENV, base[0], base[1:] + penalties))
        sampled = [self.model(), "-p", "Once", "--temp", "1.5", "--seed", "3", "-n", "80"]
        self.assertNotEqual(h.generate(ENV, sampled[0], sampled[1:]),
                            h.generate(ENV, sampled[0], sampled[1:] + ["--min-p", "0.3"]))

    def test_seed_reproducible(self):
        args = [self.model(), "-p", "Once", "--temp", "1", "--top-p", "0.9", "--seed", "42", "-n", "60"]
        a = h.generate(ENV, args[0], args[1:])
        b = h.generate(ENV, args[0], args[1:])
        self.assertEqual(a, b)
        c = h.generate(ENV, args[0], args[1:-3] + ["43", "-n", "60"])
        self.assertNotEqual(a, c)


class SameAsScalar(unittest.TestCase):
    """Greedy and seeded text from this build equal the scalar build's, and so do the logits, byte
    for byte: every kernel does scalar's float operations in one canonical order
    (kernels/numerics.h), so a build's results do not depend on its ISA."""

    def check(self, model, args):
        a = h.generate(ENV, model, args)
        b = h.generate(ENV, model, args, ref=True)
        self.assertEqual(a, b)

    def test_random_models(self):
        for wtype in ("q8", "q4"):
            m = h.random_model(ENV, "rand_%s_f32.mlb" % wtype, wtype=wtype)
            ids = " ".join(map(str, ids_for(8)))
            self.check(m, ["--tokens", ids, "--temp", "0", "-n", "100"])
            self.check(m, ["--tokens", ids, "--temp", "0.9", "--seed", "5", "-n", "100"])
            self.check(m, ["--tokens", ids, "--temp", "0.9", "--seed", "5", "-n", "100", "--min-p", "0.05",
                           "--presence-penalty", "0.7", "--frequency-penalty", "0.3"])
            for kv in ("q8", "f16"):
                self.check(m, ["--tokens", ids, "--temp", "0", "-n", "60", "--kv", kv])

    def test_stories260k(self):
        for wtype in ("q8", "q4"):
            m = h.stories260k(ENV, wtype)
            self.check(m, ["-p", "Once upon a time", "--temp", "0", "-n", "200"])
            for seed in ("9", "42") if QUICK else ("1", "9", "42", "1234"):
                self.check(m, ["-p", "Once upon a time", "--temp", "0.9", "--seed", seed, "-n", "200"])

    def test_logits_byte_identical(self):
        # 150 positions cross the 64-position attention blocks; packed (the default) and --no-pack.
        ids = ids_for(150, seed=11)
        models = [h.random_model(ENV, "rand_%s_%s.mlb" % (w, sc), wtype=w, scales=sc)
                  for w, sc in (("q8", "f32"), ("q4", "f16"))] + [h.stories260k(ENV, "q8")]
        for i, m in enumerate(models):  # ids < 256 fit every vocab
            for kv in ("f32", "q8", "f16"):
                for extra in ([], ["--no-pack"]):
                    tag = "same_%d_%s%s" % (i, kv, "_np" if extra else "")
                    b = h.dump_logits(ENV, m, ids, ENV.path(tag + "_ref.bin"), ["--kv", kv], ref=True)
                    a = h.dump_logits(ENV, m, ids, ENV.path(tag + ".bin"), ["--kv", kv] + extra)
                    self.assertTrue(read(a) == read(b), "%s --kv %s %s: logits differ from the scalar build's"
                                    % (os.path.basename(m), kv, " ".join(extra)))


def read(path):
    with open(path, "rb") as f:
        return f.read()


class ThreadsBatch(unittest.TestCase):
    """Logits are byte-identical for any thread count and prefill batch size, with every KV cache
    type; generated text is the same with and without batching."""

    def dumps(self, model, ids, variants, tag):
        outs = []
        for i, extra in enumerate(variants):
            out = ENV.path("tb_%s_%d.bin" % (tag, i))
            h.dump_logits(ENV, model, ids, out, extra)
            outs.append(read(out))
        return outs

    def test_threads_give_identical_logits(self):
        # Large enough that single-token matvecs (512 x 768 and up) cross the 2^18 multiply-add
        # threshold and really split across threads, with --batch 1 as well as batched.
        # QUICK (the ThreadSanitizer preset, 10-50x slower): fewer variants of the same checks.
        for wtype in ("q8",) if QUICK else ("q8", "q4"):
            m = h.random_model(ENV, "thr_%s.mlb" % wtype, wtype=wtype, dim=512, hidden=768, layers=2, heads=8,
                               kv_heads=2, vocab=VOCAB, max_seq=128)
            ids = ids_for(70, seed=5)  # past one 64-position attention block
            for kv in ("f32", "q8") if QUICK else ("f32", "q8", "f16"):
                variants = [["-t", t, "--kv", kv] for t in (("1", "3") if QUICK else ("1", "2", "3", "4", "7"))]
                variants += [["-t", t, "--kv", kv, "--batch", "1"] for t in ("1", "3")]
                outs = self.dumps(m, ids, variants, "t_%s_%s" % (wtype, kv))
                for o in outs[1:]:
                    self.assertEqual(o, outs[0], "%s --kv %s: -t N changed the logits" % (wtype, kv))

    def test_batch_sizes_give_identical_logits(self):
        # Q4 too in QUICK: the ARM builds have their own Q4 prefill matmuls (smmla, sdot tiles).
        for wtype in ("q8", "q4"):
            m = h.random_model(ENV, "rand_%s_f32.mlb" % wtype, wtype=wtype)
            ids = ids_for(70, seed=6)
            for kv in ("f32",) if QUICK and wtype == "q4" else ("f32", "q8", "f16"):
                outs = self.dumps(m, ids, [["--batch", b, "--kv", kv] for b in ("1", "5", "128")]
                                  + [["--batch", "5", "-t", "3", "--kv", kv]], "b_%s_%s" % (wtype, kv))
                for o in outs[1:]:
                    self.assertEqual(o, outs[0], "%s --kv %s: --batch changed the logits" % (wtype, kv))

    def test_generation_same_with_and_without_batching(self):
        m = h.stories260k(ENV, "q4")
        for kv in ("f32", "q8"):
            args = ["-p", "Once upon a time, there was a little girl named Lily.", "--temp", "0", "-n", "60", "--kv", kv]
            self.assertEqual(h.generate(ENV, m, args + ["--batch", "1"]), h.generate(ENV, m, args + ["-t", "3"]))


class Packing(unittest.TestCase):
    """Builds with packed kernels pack (the G --help names), --no-pack matches the reference too,
    and the pack cache is written, reused, and rewritten when stale or damaged."""

    def help_g(self):
        out = h.run([ENV.exe("ml_run"), "--help"])[1]
        tail = out.split("build:")[-1]
        return None if "no packed kernels" in tail else tail.split("G=")[1].split()[0]

    def test_packed_and_row_major_both_match_the_reference(self):
        g = self.help_g()
        for wtype in ("q8", "q4"):
            m = h.random_model(ENV, "rand_%s_f32.mlb" % wtype, wtype=wtype)
            _, _, err = h.run([ENV.exe("ml_run"), m, "--tokens", "1 2 3", "-n", "1", "--temp", "0"])
            if g:
                self.assertIn("packed: G=%s" % g, err)
            else:
                self.assertIn("row-major", err)
            ids = ids_for(24)
            b = h.ref_logits(ENV, m, ids, ENV.path("pk_ref_%s.bin" % wtype))
            for extra, tag in (([], "packed"), (["--no-pack"], "rowmajor")):
                a = h.dump_logits(ENV, m, ids, ENV.path("pk_%s_%s.bin" % (tag, wtype)), extra)
                ok, line = h.compare(ENV, a, b, VOCAB, "--rtol", "1e-3", "--ties", b + ".ties")
                print(wtype, tag, line)
                self.assertTrue(ok, line)

    def test_pack_cache(self):
        g = self.help_g()
        if not g:
            print("SKIP: this build has no packed kernels, so no pack cache")
            return
        m = ENV.path("cache_model.mlb")
        h.run([ENV.exe("ml_convert", ref=True), "random", "--dim", "128", "--hidden", "256", "--layers", "2",
               "--heads", "4", "--kv-heads", "2", "--vocab", "256", "--max-seq", "64", "--seed", "3", "--wtype", "q4",
               "-o", m])
        cache = m + ".pk" + g
        if os.path.exists(cache):
            os.remove(cache)
        ids = ids_for(16)
        args = ["--pack-cache"]
        base = read(h.dump_logits(ENV, m, ids, ENV.path("pc0.bin"), []))
        rc, out, err = h.run([ENV.exe("ml_run"), m, "--tokens", " ".join(map(str, ids)), "--dump-logits",
                              ENV.path("pc1.bin")] + args)
        self.assertIn("pack cache written", err)
        self.assertTrue(os.path.exists(cache))
        rc, out, err = h.run([ENV.exe("ml_run"), m, "--tokens", " ".join(map(str, ids)), "--dump-logits",
                              ENV.path("pc2.bin")] + args)
        self.assertIn("from the pack cache", err)
        self.assertEqual(read(ENV.path("pc1.bin")), base)
        self.assertEqual(read(ENV.path("pc2.bin")), base)
        # Damage the cache: it is ignored and rewritten, and the logits do not change.
        data = bytearray(read(cache))
        data[len(data) // 2] ^= 0xFF
        data[600] ^= 0xFF
        with open(cache, "wb") as f:
            f.write(data)
        rc, out, err = h.run([ENV.exe("ml_run"), m, "--tokens", " ".join(map(str, ids)), "--dump-logits",
                              ENV.path("pc3.bin")] + args)
        self.assertIn("pack cache written", err)
        self.assertEqual(read(ENV.path("pc3.bin")), base)
        # A truncated cache too.
        with open(cache, "r+b") as f:
            f.truncate(1000)
        rc, out, err = h.run([ENV.exe("ml_run"), m, "--tokens", " ".join(map(str, ids)), "--dump-logits",
                              ENV.path("pc4.bin")] + args)
        self.assertIn("pack cache written", err)
        self.assertEqual(read(ENV.path("pc4.bin")), base)

    # --- The cache's integrity (docs/reliability.md, "The pack cache").

    def cache_setup(self, name, seed=3):
        g = self.help_g()
        if not g:
            return None
        m = ENV.path(name)
        if os.path.exists(m):
            os.remove(m)
        h.run([ENV.exe("ml_convert", ref=True), "random", "--dim", "64", "--hidden", "96", "--layers", "2",
               "--heads", "4", "--kv-heads", "2", "--vocab", "256", "--max-seq", "32", "--seed", str(seed),
               "--wtype", "q4", "-o", m])
        cache = m + ".pk" + g
        if os.path.lexists(cache):
            os.remove(cache)
        return m, cache

    def run_cached(self, m, ids, out, timeout=60):
        rc, _, err = h.run([ENV.exe("ml_run"), m, "--tokens", " ".join(map(str, ids)), "--dump-logits", out,
                            "--pack-cache"], timeout=timeout)
        return err, read(out)

    def test_pack_cache_every_sampled_bit_flip_is_detected(self):
        # 240 single-bit flips spread over the body and 64 over the header: each run repacks, says
        # "pack cache written", gives the logits of a run without the cache, and rewrites the cache
        # as it was.
        s = self.cache_setup("flip_model.mlb")
        if not s:
            print("SKIP: this build has no packed kernels, so no pack cache")
            return
        m, cache = s
        ids = ids_for(6)
        base = read(h.dump_logits(ENV, m, ids, ENV.path("flip_base.bin"), []))
        err, _ = self.run_cached(m, ids, ENV.path("flip_w.bin"))
        self.assertIn("pack cache written", err)
        good = read(cache)
        body = len(good) - 512
        # KRAFLA_E2E_FLIPS: fewer body flips where each run is slow to start (e2e/CMakeLists.txt sets 40
        # for the emulated builds: wine, node, qemu).
        nb = int(os.environ.get("KRAFLA_E2E_FLIPS", "240"))
        flips = [512 + (body * i) // nb + (i * 7919) % max(1, body // nb) for i in range(nb)]
        flips += [8 * i + (i % 8) for i in range(64 if nb >= 240 else 16)]
        missed = []
        for n, pos in enumerate(flips):
            data = bytearray(good)
            data[pos] ^= 1 << (n % 8)
            with open(cache, "wb") as f:
                f.write(data)
            err, logits = self.run_cached(m, ids, ENV.path("flip_%d.bin" % n))
            if "pack cache written" not in err or logits != base:
                missed.append((pos, n % 8, "from the pack cache" in err, logits == base))
        self.assertEqual(read(cache), good)
        self.assertEqual(missed, [], "%d of %d flips not detected (byte, bit, used, same logits)" % (len(missed), len(flips)))

    def test_pack_cache_sees_a_same_size_edit_of_the_model(self):
        # One weight byte of the model changes in place, the size stays and the mtime is put back
        # with os.utime: the cache's ctime (which utime itself moves, and no caller can set) differs,
        # so the run repacks and gives the edited model's logits.
        s = self.cache_setup("edit_model.mlb", seed=4)
        if not s:
            print("SKIP: this build has no packed kernels, so no pack cache")
            return
        if "wasm" in os.path.abspath(ENV.bin):
            # Emscripten's file system under node reports no nanosecond ctime, so the in-place
            # edit is invisible there; browsers have no pack cache at all (models open from memory).
            print("SKIP: the wasm builds' stat has no ctime to see an in-place edit by")
            return
        m, cache = s
        ids = ids_for(6)
        err, before = self.run_cached(m, ids, ENV.path("edit_0.bin"))
        self.assertIn("pack cache written", err)
        err, _ = self.run_cached(m, ids, ENV.path("edit_1.bin"))
        self.assertIn("from the pack cache", err)
        st = os.stat(m)
        with open(m, "r+b") as f:  # byte 5 of blk.0.ffn_down's quants (a Q4 byte: any value is valid)
            head = f.read(256)
            n_tensors = int.from_bytes(head[148:152], "little")
            f.seek(int.from_bytes(head[152:160], "little"))
            d = f.read(96 * n_tensors)
            e = [d[i:i + 96] for i in range(0, len(d), 96) if d[i:i + 48].rstrip(b"\0") == b"blk.0.ffn_down"][0]
            off = int.from_bytes(e[64:72], "little") + 5
            f.seek(off)
            b = f.read(1)[0]
            f.seek(off)
            f.write(bytes([b ^ 0x77]))
        os.utime(m, ns=(st.st_atime_ns, st.st_mtime_ns))
        st2 = os.stat(m)
        self.assertEqual((st2.st_size, st2.st_mtime_ns, st2.st_ino), (st.st_size, st.st_mtime_ns, st.st_ino))
        expect = read(h.dump_logits(ENV, m, ids, ENV.path("edit_nocache.bin"), []))
        self.assertNotEqual(expect, before, "the edit should change the logits")
        err, after = self.run_cached(m, ids, ENV.path("edit_2.bin"))
        self.assertIn("pack cache written", err)
        self.assertEqual(after, expect)
        # A new file of the same size renamed over the model (another inode, the old mtime).
        with open(m, "rb") as f:
            data = bytearray(f.read())
        data[off] ^= 0x77
        tmp = m + ".new"
        with open(tmp, "wb") as f:
            f.write(data)
        os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.replace(tmp, m)
        err, again = self.run_cached(m, ids, ENV.path("edit_3.bin"))
        self.assertIn("pack cache written", err)
        self.assertEqual(again, before)

    def test_pack_cache_that_is_a_fifo_is_left_alone(self):
        # A FIFO at MODEL.pk<G>: the run neither hangs on it nor replaces it, and packs in memory.
        s = self.cache_setup("fifo_model.mlb", seed=5)
        if not s:
            print("SKIP: this build has no packed kernels, so no pack cache")
            return
        m, cache = s
        os.mkfifo(cache)
        try:
            ids = ids_for(6)
            base = read(h.dump_logits(ENV, m, ids, ENV.path("fifo_base.bin"), []))
            err, logits = self.run_cached(m, ids, ENV.path("fifo_1.bin"), timeout=20)
            self.assertNotIn("from the pack cache", err)
            self.assertNotIn("pack cache written", err)
            self.assertEqual(logits, base)
            self.assertTrue(stat.S_ISFIFO(os.lstat(cache).st_mode), "the FIFO was replaced")
        finally:
            os.remove(cache)


class Mem32(unittest.TestCase):
    """32-bit builds: a model whose KV cache would exceed 4 GB fails with the no-memory status (exit 1,
    a message naming the overflow) instead of corrupting memory; the same model with a short --ctx runs."""

    def test_kv_cache_above_4gb_is_refused(self):
        # 3 layers x 3,000,000 positions x kv_dim 64 x 4 bytes x (K, V) = 4.6 GB of F32 cache.
        m = ENV.path("bigkv.mlb")
        h.run([ENV.exe("ml_convert", ref=True), "random", "--dim", "128", "--hidden", "256", "--layers", "3",
               "--heads", "4", "--kv-heads", "2", "--vocab", "256", "--max-seq", "3000000", "--seed", "1",
               "--wtype", "q8", "-o", m])
        # The whole max_seq asked for (the default context is capped at 4096, docs/reliability.md).
        rc, out, err = h.run([ENV.exe("ml_run"), m, "--tokens", "1 2", "-n", "1", "--temp", "0", "--ctx", "3000000"],
                             check=False)
        self.assertEqual(rc, 1, "stdout %r stderr %r" % (out[-300:], err[-300:]))
        self.assertIn("overflows the address space", err)
        rc, out, err = h.run([ENV.exe("ml_run"), m, "--tokens", "1 2", "-n", "1", "--temp", "0", "--ctx", "64"],
                             check=False)
        self.assertEqual(rc, 0, err[-300:])


GROUPS = {"archs": Archs, "mem32": Mem32, "logits": Logits, "kv": Kv, "real": Real, "story": Story, "cli": Cli, "same-as-scalar": SameAsScalar,
          "threads-batch": ThreadsBatch, "packing": Packing}


def main():
    global ENV
    ap = argparse.ArgumentParser()
    ap.add_argument("group", choices=sorted(GROUPS))
    ap.add_argument("--bin", required=True)
    ap.add_argument("--ref-bin", required=True)
    ap.add_argument("--shared", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    ENV = h.Env(a.bin, a.ref_bin, a.shared, a.work)
    h.skip_if_cpu_lacks_isa(ENV)
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(GROUPS[a.group])
    result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
