"""Shared helpers for the end-to-end tests: running the built executables, making models,
comparing logits. Python 3 standard library only."""
import argparse
import os
import subprocess
import sys
import unittest


class Env:
    """Where things are: this build's bin/, the scalar build's bin/ (oracle and reference
    executables), shared/ and a scratch folder."""

    def __init__(self, bin_dir, ref_bin, shared, work):
        self.bin = bin_dir
        self.ref_bin = ref_bin
        self.shared = shared
        self.work = work
        os.makedirs(work, exist_ok=True)
        self.tools = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools")

    def exe(self, name, ref=False):
        return os.path.join(self.ref_bin if ref else self.bin, name)

    def path(self, name):
        return os.path.join(self.work, name)

    def shared_path(self, rel):
        return os.path.join(self.shared, rel)


def env_from_args(ap=None, ref_bin=False):
    """Parses the command line: --bin, --shared, --work (and --ref-bin when ref_bin; else the
    oracle executables are --bin's) besides what ap already defines. Returns (Env, the parsed
    arguments)."""
    ap = ap or argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    if ref_bin:
        ap.add_argument("--ref-bin", required=True)
    ap.add_argument("--shared", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    return Env(a.bin, a.ref_bin if ref_bin else a.bin, a.shared, a.work), a


def run_cases(*cases):
    """Runs the unittest.TestCase classes verbosely on stdout and exits: 0 when all passed, else 1."""
    suite = unittest.TestSuite([unittest.defaultTestLoader.loadTestsFromTestCase(c) for c in cases])
    sys.exit(0 if unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite).wasSuccessful() else 1)


class Failures(list):
    """The failed checks of a script that runs them all and reports at the end, instead of stopping
    at the first."""

    def check(self, cond, what):
        """Records and prints what when cond is false; returns cond."""
        if not cond:
            self.append(what)
            print("FAIL:", what)
        return cond


def skip_if_cpu_lacks_isa(env):
    """On a CPU without the build's instruction set every executable exits 3 (native/main_guard.cpp)
    and nothing of the build can be tested: print "SKIP (CPU): <the guard's message>", which CTest
    counts as skipped (e2e/CMakeLists.txt), and exit. Any other failure to start is left to the
    tests."""
    p = subprocess.run([env.exe("ml_run"), "--help"], capture_output=True, text=True, errors="replace")
    if p.returncode == 3 and "this build needs the" in p.stderr:
        print("SKIP (CPU): " + p.stderr.strip())
        sys.exit(0)


def run(cmd, check=True, timeout=600, stdin=None):
    """Runs cmd; returns (returncode, stdout, stderr). Raises with both streams when check
    and the exit code is not 0."""
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, input=stdin,
                       errors="replace")
    if check and p.returncode != 0:
        raise AssertionError("command failed (%d): %s\nstdout: %s\nstderr: %s"
                             % (p.returncode, " ".join(map(str, cmd)), p.stdout[-2000:], p.stderr[-2000:]))
    return p.returncode, p.stdout, p.stderr


def random_model(env, name, wtype="q8", scales="f32", dim=128, hidden=256, layers=3, heads=4, kv_heads=2,
                 vocab=256, max_seq=160, seed=1):
    """Writes a random model with the scalar build's ml_convert unless present."""
    out = env.path(name)
    if not os.path.exists(out):
        run([env.exe("ml_convert", ref=True), "random", "--dim", dim, "--hidden", hidden, "--layers", layers,
             "--heads", heads, "--kv-heads", kv_heads, "--vocab", vocab, "--max-seq", max_seq, "--seed", seed,
             "--wtype", wtype, "--scales", scales, "-o", out])
    return out


def stories260k(env, wtype="q8", scales="f32"):
    """stories260K.bin + tok512.bin converted to .mlb."""
    out = env.path("stories260K_%s_%s.mlb" % (wtype, scales))
    if not os.path.exists(out):
        run([env.exe("ml_convert", ref=True), "llama2c", env.shared_path("models/stories260K.bin"), "--tokenizer",
             env.shared_path("models/tok512.bin"), "--wtype", wtype, "--scales", scales, "-o", out])
    return out


def dump_logits(env, model, ids, out, extra=(), ref=False):
    run([env.exe("ml_run", ref=ref), model, "--tokens", " ".join(map(str, ids)), "--dump-logits", out] + list(extra))
    return out


def ref_logits(env, model, ids, out, kv="f32"):
    """The oracle's logits, plus out + ".ties": per position, the activations that sat within
    float32 rounding of a Q8 rounding tie (compare_logits.py --ties)."""
    run([env.exe("ref_forward", ref=True), model, "--tokens", " ".join(map(str, ids)), "--kv", kv,
         "--dump-logits", out, "--near-ties", out + ".ties"])
    return out


def compare(env, a, b, vocab, *flags):
    """Runs tools/compare_logits.py; returns (passed, summary line)."""
    code, out, err = run([sys.executable, os.path.join(env.tools, "compare_logits.py"), a, b, "--vocab", vocab]
                         + list(flags), check=False)
    if code == 2:
        raise AssertionError("compare_logits.py usage/IO error: " + out + err)
    return code == 0, (out + err).strip()


def generate(env, model, args, ref=False):
    """Runs ml_run and returns its stdout (the text)."""
    return run([env.exe("ml_run", ref=ref), model] + [str(a) for a in args])[1]


def encode(env, model, text):
    out = run([env.exe("ml_tok", ref=True), model, "encode", text])[1]
    return [int(t) for t in out.split()]
