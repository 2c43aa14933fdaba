#!/usr/bin/env python3
"""Smoke test of scripts/bench-long-context: the long-context comparison with llama.cpp still runs
end to end. Never a timed assertion: no figure is compared with a speed.

`scripts/bench-long-context --short` (shape tiny, Q4, 256 positions, -t 1, one round) exits 0, and
its table holds one row per engine and KV type (krafla f32, q8, f16; llama.cpp f32, f16) with a
positive best >= median tok/s; krafla's rows carry an attention time and a share in (0, 100), and
the ratio printed beside each is its median over llama.cpp's at the same KV type (f16 for q8); the
report names the model's command, its position count and the foreign-load count.

  test_bench_long.py --bin BUILD/bin --work DIR [--node node]
Prints "SKIP (llama.cpp): ..." and exits 0 when e2e/llamacpp's node_modules is not installed.
"""
import argparse
import os
import re
import subprocess
import sys

from benchcheck import check_best_median, check_ratio  # noqa: E402 (this folder)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(ROOT, "scripts", "bench-long-context")


def cells(text):
    """{(engine, kv): [best, median, attention s or None, share or None, ratio or None]} of the table."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"\| (krafla|llama\.cpp) \| (f32|q8|f16) \| 1 \| ([\d.]+) / ([\d.]+) \| (\S+) \| (\S+) \| (.+?) \|$",
                     line)
        if m:
            opt = lambda s: None if s == "–" else float(s.rstrip("%").split()[0])
            out[(m.group(1), m.group(2))] = [float(m.group(3)), float(m.group(4)), opt(m.group(5)), opt(m.group(6)),
                                             opt(m.group(7))]
    return out


def check(text, failures):
    c = cells(text)
    want = {("krafla", "f32"), ("krafla", "q8"), ("krafla", "f16"), ("llama.cpp", "f32"), ("llama.cpp", "f16")}
    if set(c) != want:
        failures.append(f"table rows {sorted(c)} are not {sorted(want)}:\n{text}")
        return
    for (engine, kv), (best, median, attn, share, ratio) in c.items():
        check_best_median(f"{engine} {kv}", [best, median], failures)
        if engine == "krafla":
            if attn is None or attn <= 0 or share is None or not 0 < share < 100:
                failures.append(f"krafla {kv}: attention {attn} s, share {share}% (want > 0 and in (0, 100))")
            peer = c[("llama.cpp", kv if kv != "q8" else "f16")][1]
            check_ratio(f"krafla {kv}: ratio", ratio, median, peer, failures, rel=0.002)
        elif attn is not None or ratio is not None:
            failures.append(f"llama.cpp {kv}: an attention figure or ratio where none is measured")
    for what, pattern in (("the model's command", r"`ml_convert random --dim 256 .*--max-seq 256 --wtype q4"),
                          ("the positions", r"255 greedy tokens from a 1-token prompt"),
                          ("the foreign-load count", r"Foreign load: \d+ timed runs; \d+ rejected")):
        if not re.search(pattern, text):
            failures.append(f"the report does not name {what} ({pattern})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--node", default="node")
    a = ap.parse_args()
    if not os.path.exists(os.path.join(HERE, "node_modules", "node-llama-cpp", "package.json")):
        print("SKIP (llama.cpp): e2e/llamacpp/node_modules is not installed (scripts/install-deps)")
        return 0
    os.makedirs(a.work, exist_ok=True)
    r = subprocess.run([sys.executable, SCRIPT, "--short", "--bin", a.bin, "--node", a.node,
                        "--out", os.path.join(a.work, "out"), "--models", os.path.join(a.work, "models")],
                       capture_output=True, text=True, timeout=600)
    failures = []
    if r.returncode != 0:
        failures.append(f"bench-long-context --short exited {r.returncode}:\n{r.stderr[-3000:]}")
    else:
        check(r.stdout, failures)
        with open(os.path.join(a.work, "out", "long.md")) as f:
            if f.read() != r.stdout.rstrip("\n") + "\n":
                failures.append("build/bench-long/long.md is not the table printed")
    for f in failures:
        print("FAIL:", f)
    print(f"{'FAILED' if failures else 'OK'}: bench-long-context --short")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
