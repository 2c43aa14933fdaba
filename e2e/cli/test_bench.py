"""ml_bench smoke test: it names the kernel each op resolved to, times every kernel shape of the
table and decodes a model, all with sane numbers. (Speed itself is never asserted: the machines
are shared; docs/benchmarks.md records measured figures.)

usage: test_bench.py --bin BUILD_BIN --ref-bin SCALAR_BIN --shared SHARED --work DIR ISA"""
import argparse
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

ENV = None
ISA = None
OPS = ["matvec_q8", "matvec_q4", "quantize_q8", "rmsnorm", "softmax", "silu_mul", "add", "rope", "dot_f32",
       "axpy_f32", "dot_q8", "axpy_q8", "dot_f16", "axpy_f16"]


def table_rows(out):
    """The Markdown table rows of out as lists of cells (header and separator rows dropped)."""
    rows = []
    for line in out.splitlines():
        if line.startswith("|") and not line.startswith("| ---"):
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


class Bench(unittest.TestCase):
    def test_kernels_and_decode(self):
        m = h.random_model(ENV, "rand_q8_f32.mlb")
        out = h.run([ENV.exe("ml_bench"), "--reps", "1", "--min-ms", "1", "--model", m, "-n", "16"], timeout=900)[1]
        self.assertIn("build ISA: %s" % ISA, out)
        for op in OPS:  # every op resolved to a kernel of the build's chain
            self.assertRegex(out, r"(?m)^%s -> ml_k_%s_\w+$" % (op, op))
        rows = table_rows(out)
        shapes = {(r[0], r[2]) for r in rows if len(r) > 2}
        for op in ("matvec_q8", "matvec_q4"):
            for shape in ("768 x 768", "4096 x 4096", "4864 x 896", "896 x 4864"):
                self.assertIn((op, shape), shapes, "no %s %s row" % (op, shape))
        numbers = [float(c) for r in rows for c in r if re.fullmatch(r"\d+(\.\d+)?", c)]
        self.assertTrue(numbers and all(x >= 0 for x in numbers))
        decode = [r for r in rows if r and r[0].endswith("rand_q8_f32.mlb")]
        self.assertTrue(decode, "no decode row for the model:\n" + out)
        self.assertGreater(float(decode[0][-1]), 0.0)


def main():
    global ENV, ISA
    ap = argparse.ArgumentParser()
    ap.add_argument("isa")
    ap.add_argument("--bin", required=True)
    ap.add_argument("--ref-bin", required=True)
    ap.add_argument("--shared", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    ENV = h.Env(a.bin, a.ref_bin, a.shared, a.work)
    ISA = a.isa
    r = unittest.TextTestRunner(verbosity=2).run(unittest.defaultTestLoader.loadTestsFromTestCase(Bench))
    sys.exit(0 if r.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
