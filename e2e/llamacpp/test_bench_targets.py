#!/usr/bin/env python3
"""Smoke test of scripts/bench-targets, the cross-target dashboard; scripts/test-web runs it after
the Playwright tests (it needs web/dist) and keeps its output, build/bench-targets/targets.{md,svg},
as the short run's artifact. Never a timed assertion: no figure is compared with a speed.

`scripts/bench-targets --short --no-build` (tiny Q8; scalar and native builds, llama.cpp,
wasm_simd128 in Chromium and node; -t 1; one round) exits 0, and its table holds a row for each of
those targets with positive best >= median tok/s; every "× best native" ratio is the row's median
over the best native build's median (so the best native row reads 1.00 and none reads more), and
every "× llama.cpp" ratio the row's median over llama.cpp's (its own row 1.00); the chart is an SVG
document naming the targets.

  test_bench_targets.py [--node node]
Prints "SKIP (llama.cpp): ..." when e2e/llamacpp's node_modules is missing, "SKIP (web): ..." when
web/dist is; exits 0 then.
"""
import argparse
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

from benchcheck import best_median, check_best_median, check_ratio  # noqa: E402 (this folder)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(ROOT, "scripts", "bench-targets")
OUT = os.path.join(ROOT, "build", "bench-targets")


def rows(text):
    out = {}
    for line in text.splitlines():
        c = [x.strip() for x in line.strip().strip("|").split("|")]
        if len(c) == 10 and c[0] == "tiny-q8" and c[3] == "1" and "/" in c[4]:
            out[(c[1], c[2])] = [best_median(c[4]), best_median(c[5])] + [float(v) for v in c[6:10]]
    return out


def check(text, failures):
    r = rows(text)
    native = [k for k in r if k[1] == "native" and k[0].startswith("native (")]
    want = [("scalar", "native"), ("llama.cpp", "native"), ("wasm_simd128", "Chromium")]
    has_native = os.path.exists(os.path.join(ROOT, "build", "native", "bin", "ml_bench"))
    missing = [k for k in want if k not in r] + ([] if native or not has_native else [("native (ISA)", "native")]) + \
              ([] if any(k[0] == "wasm_simd128" and k[1].startswith("node") for k in r) else [("wasm_simd128", "node")])
    if missing:
        failures.append(f"no table row for {missing}:\n{text}")
        return
    best = [max(r[k][i][1] for k in r if k[1] == "native" and k[0] != "llama.cpp") for i in (0, 1)]
    lc = [r[("llama.cpp", "native")][i][1] for i in (0, 1)]
    for k, (p, d, xp, xd, lp, ld) in r.items():
        for name, pair in (("prefill", p), ("decode", d)):
            check_best_median(f"{k} {name}", pair, failures)
        for name, got, num, den in (("prefill × best native", xp, p[1], best[0]), ("decode × best native", xd, d[1], best[1]),
                                    ("prefill × llama.cpp", lp, p[1], lc[0]), ("decode × llama.cpp", ld, d[1], lc[1])):
            check_ratio(f"{k} {name}", got, num, den, failures)
        if k[1] == "native" and k[0] != "llama.cpp" and xd > 1.0 + 1e-9:
            failures.append(f"{k}: a native build above the best native build ({xd})")
    svg = os.path.join(OUT, "targets.svg")
    try:
        doc = ET.tostring(ET.parse(svg).getroot(), encoding="unicode")
        for label in ("scalar", "llama.cpp", "wasm_simd128 (Chromium)"):
            if label not in doc:
                failures.append(f"the chart {svg} does not name {label}")
    except (OSError, ET.ParseError) as e:
        failures.append(f"the chart {svg} is not an SVG document: {e}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--node", default="node")
    a = ap.parse_args()
    if not os.path.exists(os.path.join(HERE, "node_modules", "node-llama-cpp", "package.json")):
        print("SKIP (llama.cpp): e2e/llamacpp/node_modules is not installed (scripts/install-deps)")
        return 0
    if not os.path.exists(os.path.join(ROOT, "web", "dist", "builds.json")):
        print("SKIP (web): no web/dist (scripts/test-web makes it)")
        return 0
    r = subprocess.run([sys.executable, SCRIPT, "--short", "--no-build", "--node", a.node, "--out", OUT],
                       capture_output=True, text=True, timeout=900)
    failures = []
    if r.returncode != 0:
        failures.append(f"bench-targets --short exited {r.returncode}:\n{r.stderr[-3000:]}")
    else:
        check(r.stdout, failures)
    for f in failures:
        print("FAIL:", f)
    print(f"{'FAILED' if failures else 'OK'}: bench-targets --short (output in {os.path.relpath(OUT, ROOT)}/)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
