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


def header_and_rows(out, first_cell):
    """The Markdown table of out whose header starts with first_cell: (header, rows)."""
    tables, cur = [], None
    for line in out.splitlines():
        if not line.startswith("|"):
            cur = None
            continue
        if line.startswith("| ---"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cur is None:
            cur = (cells, [])
            tables.append(cur)
        else:
            cur[1].append(cells)
    for header, rows in tables:
        if header[0] == first_cell:
            return header, rows
    raise AssertionError("no table starting with %r in:\n%s" % (first_cell, out))


class Bench(unittest.TestCase):
    def test_kernels(self):
        out = h.run([ENV.exe("ml_bench"), "--reps", "1", "--min-ms", "1"], timeout=900)[1]
        self.assertIn("build ISA: %s" % ISA, out)
        for op in OPS:  # every op resolved to a kernel of the build's chain
            self.assertRegex(out, r"(?m)^%s -> ml_k_%s_\w+$" % (op, op))
        header, rows = header_and_rows(out, "op")
        shapes = {(r[0], r[2]) for r in rows}
        ops = ["matvec_q8", "matvec_q4"]
        if ISA != "scalar":  # every SIMD build packs: its packed kernels are timed too
            ops += ["matvec_q8_pk", "matvec_q4_pk", "matmul_q8_pk (128 tok)", "matmul_q4_pk (128 tok)"]
        for op in ops:
            for shape in ("768 x 768", "4096 x 4096", "4864 x 896", "896 x 4864"):
                self.assertIn((op, shape), shapes, "no %s %s row" % (op, shape))
        gops = header.index("GOPS")
        for r in rows:
            if r[0].startswith("mat"):
                self.assertGreater(float(r[gops]), 0.0, r)

    def test_model(self):
        m = h.random_model(ENV, "rand_q8_f32.mlb")
        out = h.run([ENV.exe("ml_bench"), "--reps", "1", "--model", m, "--prefill", "16", "-n", "16"], timeout=900)[1]
        header, rows = header_and_rows(out, "model")
        self.assertEqual(len(rows), 1, out)
        self.assertTrue(rows[0][0].endswith("rand_q8_f32.mlb"))
        for col in ("prefill tok/s", "decode tok/s"):
            self.assertGreater(float(rows[0][header.index(col)]), 0.0, out)

    def test_sessions(self):
        """--sessions N: a second row for N sessions stepped together, their aggregate tokens,
        and the memory footnote (sessions hold their caches, not the weights)."""
        m = h.random_model(ENV, "rand_q8_f32.mlb")
        out = h.run([ENV.exe("ml_bench"), "--reps", "1", "--model", m, "--prefill", "8", "-n", "8", "--sessions", "3"],
                    timeout=900)[1]
        header, rows = header_and_rows(out, "model")
        self.assertEqual(len(rows), 2, out)
        col = header.index("sessions")
        self.assertEqual([r[col] for r in rows], ["1", "3"])
        self.assertEqual(rows[1][header.index("decode tokens")], "24")
        self.assertEqual(rows[1][header.index("prefill tokens")], "24")
        for r in rows:
            self.assertGreater(float(r[header.index("decode tok/s")]), 0.0, out)
        self.assertRegex(out, r"3 sessions together: decode [0-9.]+x, prefill [0-9.]+x")
        self.assertRegex(out, r"with 3 sessions [0-9]+ MiB \([0-9.]+ MiB each")
        rc, _, err = h.run([ENV.exe("ml_bench"), "--model", m, "--sessions", "0"], check=False)
        self.assertEqual(rc, 2, err)
        self.assertIn("--sessions", err)

    def test_probe(self):
        """--probe-mb: one more decode, each token followed by a read of that many MB on -t threads.
        Its line's figures agree with each other (GB/s = MB / the probe's median; the median ratio
        within its quartiles; the tokens counted are the decoded ones that fed a token), and so do
        those of the matrices-alone line, whose MB are the model's weights; a bad value exits 2
        naming the option; a build for another system refuses the option by name."""
        m = h.random_model(ENV, "rand_q8_f32.mlb")
        cmd = [ENV.exe("ml_bench"), "--reps", "1", "--model", m, "--prefill", "8", "-n", "12", "-t", "2",
               "--probe-mb", "6"]
        rc, out, err = h.run(cmd, check=False, timeout=900)
        with open(ENV.exe("ml_bench"), "rb") as f:
            windows = b".exe" in f.read(4096)  # the wine builds' emu-bin wrapper names ml_bench.exe
        if windows:  # the probe is Linux only
            self.assertEqual(rc, 2, err)
            self.assertIn("--probe-mb", err)
            return
        self.assertEqual(rc, 0, err)
        g = re.search(r"interleaved probe: (\d+) tokens, each followed by a ([\d.]+) MB read on 2 threads \(.+\): "
                      r"token median ([\d.]+) ms \(([\d.]+) tok/s\), probe median ([\d.]+) ms \(([\d.]+) GB/s\); "
                      r"probe / token seconds per token: median ([\d.]+)% \(quartiles ([\d.]+)-([\d.]+)%\)", out)
        self.assertIsNotNone(g, out)
        n, mb, tok_ms, tps, probe_ms, gbs, med, q1, q3 = (float(x) for x in g.groups())
        self.assertEqual(n, 10, out)  # 12 steps: the first only samples, the last feeds nothing
        self.assertTrue(6.0 <= mb < 6.01, out)  # rounded up to 256 bytes a thread
        # both sides from printed figures: ms to 3 decimals, tok/s to 1, GB/s to 2
        self.assertAlmostEqual(tps, 1000 / tok_ms, delta=tps * 0.0006 / tok_ms + 0.06)
        self.assertAlmostEqual(gbs, mb / probe_ms, delta=gbs * 0.0006 / probe_ms + 0.006)
        self.assertTrue(0 < q1 <= med <= q3, out)
        # The same interleave over the matrix products alone: as many passes as tokens, over the
        # weights a token reads (from the model's shape: dim 128, hidden 256, 3 layers, 4 heads,
        # 2 KV heads of 32, vocabulary 256; Q8 with an f32 scale per 32 weights).
        g = re.search(r"matrices alone: (\d+) passes over the ([\d.]+) MB of weights a token reads, each followed by "
                      r"the probe: pass median ([\d.]+) ms \(([\d.]+) GB/s\), the token's other work about "
                      r"(-?[\d.]+) ms; pass / probe read rate per pass: median ([\d.]+)% "
                      r"\(quartiles ([\d.]+)-([\d.]+)%\)", out)
        self.assertIsNotNone(g, out)
        passes, wmb, pass_ms, pass_gbs, other_ms, pmed, pq1, pq3 = (float(x) for x in g.groups())
        self.assertEqual(passes, n, out)
        layer = 128 * 128 + 2 * 64 * 128 + 128 * 128 + 3 * 256 * 128
        self.assertAlmostEqual(wmb, (3 * layer + 256 * 128) * (1 + 4 / 32) / 1e6, delta=0.0006)
        self.assertAlmostEqual(pass_gbs, wmb / pass_ms, delta=pass_gbs * 0.0006 / pass_ms + 0.006)
        self.assertAlmostEqual(other_ms, tok_ms - pass_ms, delta=0.0015)
        self.assertTrue(0 < pq1 <= pmed <= pq3, out)
        rc, _, err = h.run([ENV.exe("ml_bench"), "--model", m, "--probe-mb", "-1"], check=False)
        self.assertEqual(rc, 2, err)
        self.assertIn("--probe-mb", err)


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
    h.skip_if_cpu_lacks_isa(ENV)
    ISA = a.isa
    r = unittest.TextTestRunner(verbosity=2).run(unittest.defaultTestLoader.loadTestsFromTestCase(Bench))
    sys.exit(0 if r.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
