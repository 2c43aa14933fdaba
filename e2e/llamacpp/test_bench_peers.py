#!/usr/bin/env python3
"""Smoke test of scripts/bench-peers: the comparison with llama.cpp still runs end to end. Never a
timed assertion: no figure is compared with a speed.

  1. `scripts/bench-peers --short` (shape tiny, Q8, -t 1, prefill 16, decode 16, one round, a 256 MiB
     bandwidth probe) exits 0; its table has one row with positive tok/s for both engines; each ratio
     is the quotient of the medians printed beside it; GB/s = weights MB/token x best decode tok/s
     and % = GB/s / the probe's -t 1 figure printed above the table; the foreign-load line counts
     the runs; the chart is an SVG document holding the cell's label and both engines' names.
  2. The weight bytes a token reads, counted from the GGUF header, equal the tiny shape's sizes
     worked out by hand here (Q8_0: 34 bytes per 32 weights, Q4_0: 18; f32 norms; the output
     matrix is separate, so the embedding table is left out); so do the KV cache bytes (tiny, f16
     and f32) and a Qwen3.5-shaped header's KV and recurrent-state bytes (written here); the table's
     KV + state column and its % of the probe with them agree with those bytes; the last column is
     each engine's decode GB/s, of the weights and of the weights with the KV cache, over the probe
     figure printed beside it (the mean of those taken just before and after its run), and the
     header counts 2 runs; the same cell from known runs whose cache is as large as the weights. krafla's
     decode against a probe after each token (ml_bench --probe-mb) is 'N% / N%; matrices alone N%',
     the second the first scaled by (weights + cache) / weights, the third the matrix products alone;
     the same from known runs.
  3. The foreign-load measure: a sleeping child with a CPU-bound process of this test running beside
     it is measured with at least 0.5 foreign CPUs; a CPU-bound child's own time is counted as its
     own (at least 0.9 of the 1 s it burns), not foreign. The guard reruns a rejected run at most
     --retries times and counts what it did.
  4. ml_bwprobe's bad arguments exit 2 naming the option. Its row gives the fastest of its prefetch
     modes: the best GB/s is at least each other mode's best printed beside it; --no-prefetch times
     plain loads only.

  test_bench_peers.py --bin BUILD/bin --work DIR [--node node]
Prints "SKIP (llama.cpp): ..." and exits 0 when e2e/llamacpp's node_modules is not installed.
"""
import argparse
import os
import re
import struct
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

from benchcheck import best_median, check_best_median, check_ratio  # noqa: E402 (this folder)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(ROOT, "scripts", "bench-peers")
TINY = ["--dim", "256", "--hidden", "512", "--layers", "4", "--heads", "8", "--kv-heads", "2", "--vocab", "512"]


def load_module():
    sys.path.insert(0, os.path.dirname(SCRIPT))
    from benchlib import load_script
    return load_script("bench-peers")


def tiny_bytes(block_bytes):
    """Bytes of the tiny shape's weights per token: layers' matrices and the output in blocks of 32
    weights, norms in f32; dim 256, hidden 512, 8 heads of 32 (2 KV heads), vocab 512, 4 layers."""
    dim, hidden, kv_dim, vocab, layers = 256, 512, 64, 512, 4
    per_layer = dim * dim * 2 + dim * kv_dim * 2 + dim * hidden * 3
    norms = (2 * layers + 1) * dim * 4
    return (layers * per_layer + vocab * dim) // 32 * block_bytes + norms


def tiny_cache_bytes(kv_bytes, prefill, decode):
    """The tiny shape's KV cache at the mean attended position: 4 layers, 2 KV heads of 32 (K and V)."""
    return int(4 * 2 * (32 + 32) * kv_bytes * (prefill + (decode + 1) / 2))


def num(s):
    return float(s.replace("%", "").strip())


def check_table(text, failures):
    rows = [l for l in text.splitlines() if l.startswith("| tiny-q8 | 1 |")]
    if len(rows) != 1:
        failures.append(f"expected one table row for tiny-q8 -t 1, got {len(rows)}:\n{text}")
        return
    c = [x.strip() for x in rows[0].strip().strip("|").split("|")]
    # model -t MB kp(best/med) lp ratio kd ld ratio kgb(%) lgb(%) cacheMB with-cache beside
    mb = num(c[2])
    kp, lp, kd, ld = (best_median(c[i]) for i in (3, 4, 6, 7))
    for name, v in (("krafla prefill", kp), ("llama.cpp prefill", lp), ("krafla decode", kd), ("llama.cpp decode", ld)):
        check_best_median(name, v, failures)
    for name, ratio, k, l in (("prefill", num(c[5]), kp[1], lp[1]), ("decode", num(c[8]), kd[1], ld[1])):
        check_ratio(f"{name} ratio (krafla / llama.cpp)", ratio, k, l, failures, rel=0.002)
    m = re.search(r"Read bandwidth .*?: ([\d.]+) GB/s at -t 1", text)
    if not m:
        failures.append("no read-bandwidth figure at -t 1 above the table")
        return
    probe1 = float(m.group(1))
    for name, cell, best in (("krafla", c[9], kd[0]), ("llama.cpp", c[10], ld[0])):
        g = re.match(r"([\d.]+) \(([\d.]+)%\)$", cell)
        if not g:
            failures.append(f"{name} GB/s cell '{cell}' is not 'GB/s (N%)'")
            continue
        gbs, pct = float(g.group(1)), float(g.group(2))
        want = mb * best / 1000
        if not abs(gbs - want) <= 0.06 + 0.03 * want:  # MB/token printed to 0.1, tok/s to 0.1 or 1
            failures.append(f"{name} decode GB/s {gbs} is not {mb} MB x {best} tok/s = {want:.2f}")
        if not abs(pct - 100 * gbs / probe1) <= 1 + 0.02 * pct:
            failures.append(f"{name} {pct}% is not {gbs} / the probe's {probe1} GB/s")
    cache_mb = num(c[11])
    want_mb = tiny_cache_bytes(2, 16, 16) / 1e6  # --short: f16 KV, prefill 16, decode 16
    if abs(cache_mb - want_mb) > 0.006:
        failures.append(f"KV + state MB/token {cache_mb} is not the tiny shape's {want_mb:.3f}")
    g = re.match(r"(\d+)% / (\d+)%$", c[12])
    if not g:
        failures.append(f"the with-KV cell '{c[12]}' is not 'N% / N%'")
    else:
        for name, pct, best in (("krafla", float(g.group(1)), kd[0]), ("llama.cpp", float(g.group(2)), ld[0])):
            want = 100 * (mb + cache_mb) * best / 1000 / probe1
            if not abs(pct - want) <= 1 + 0.03 * want:
                failures.append(f"{name} {pct}% with KV is not ({mb} + {cache_mb}) MB x {best} tok/s / {probe1} GB/s")
    g = re.match(r"(\d+)% / (\d+)%; with KV \+ state (\d+)% / (\d+)% \(([\d.]+) / ([\d.]+) GB/s\)$", c[13])
    if not g:
        failures.append(f"the probes-around-the-run cell '{c[13]}' is not 'N% / N%; with KV + state N% / N% (GB/s / GB/s)'")
    else:  # one round: each engine's decode over the mean of the probes before and after its run
        cache = tiny_cache_bytes(2, 16, 16)
        for name, pct, pct_all, probe, best in (
                ("krafla", float(g.group(1)), float(g.group(3)), float(g.group(5)), kd[0]),
                ("llama.cpp", float(g.group(2)), float(g.group(4)), float(g.group(6)), ld[0])):
            for what, got, nbytes in (("", pct, tiny_bytes(34)), (" with KV", pct_all, tiny_bytes(34) + cache)):
                want = 100 * nbytes * best / 1e9 / probe  # the exact bytes: the MB column is rounded
                if probe <= 0 or not abs(got - want) <= 0.6 + 0.004 * want:  # % to 1, probe to 0.1 GB/s
                    failures.append(f"{name} {got}%{what} against the probes around its run is not "
                                    f"{nbytes / 1e6:.3f} MB x {best} tok/s / {probe} GB/s")
    g = re.match(r"(\d+)% / (\d+)%; matrices alone (\d+)%$", c[14]) if len(c) > 14 else None
    if not g or int(g.group(3)) <= 0:
        failures.append(f"the probe-after-each-token cell '{c[14] if len(c) > 14 else ''}' is not "
                        "'N% / N%; matrices alone N%'")
    elif not (int(g.group(1)) > 0 and abs(int(g.group(2)) - int(g.group(1)) * (mb + cache_mb) / mb) <= 1 + 0.02 * int(g.group(2))):
        failures.append(f"the probe-after-each-token cell '{c[14]}': with KV is not weights x ({mb} + {cache_mb}) / {mb}")
    m = re.search(r"Foreign load: (\d+) timed runs; (\d+) rejected .*?; (\d+) kept", text)
    if not m or int(m.group(1)) < 6 or int(m.group(1)) != 6 + int(m.group(2)):
        failures.append("the foreign-load line does not count 6 runs (the round's probe, the probes before, between "
                        "and after the engines' runs, krafla, llama.cpp) plus the reruns: " + (m.group(0) if m else "missing"))
    m = re.search(r"differed by more than 10% around (\d+) of the (\d+) runs", text)
    if not m or int(m.group(2)) != 2 or int(m.group(1)) > 2:
        failures.append("the header does not count the 2 runs whose probes moved: " + (m.group(0) if m else "missing"))


def check_around_cell(bp, failures):
    """The last column from known runs: 1 GB of weights and 1 GB of KV + state a token, three rounds
    of decode tok/s against the mean probes around each run (median of 50, 40, 44% = 44%; with the
    cache twice that). The tiny shape's cache is too small beside its weights to tell the two apart."""
    cells = {("m", 1): {"kp": [100], "lp": [50], "kd": [10, 12, 11], "ld": [5, 5, 5],
                        "kb": [20, 30, 25], "lb": [20, 20, 20], "ki": [70.0, 80.0, 74.6],
                        "km": [86.0, 80.0, 83.4]}}
    lines, _ = bp.table(cells, {"m": 1e9}, {1: 30.0}, {"m": 1e9})
    inter = lines[-1].strip().strip("|").split("|")[14].strip()
    # median 74.6, twice that with the cache as large as the weights; the matrices' median 83.4
    if inter != "75% / 149%; matrices alone 83%":
        failures.append(f"the probe-after-each-token cell of known runs reads '{inter}', "
                        "not '75% / 149%; matrices alone 83%'")
    cell = lines[-1].strip().strip("|").split("|")[13].strip()
    if cell != "44% / 25%; with KV + state 88% / 50% (25.0 / 20.0 GB/s)":
        failures.append(f"the probes-around cell of known runs reads '{cell}', "
                        "not '44% / 25%; with KV + state 88% / 50% (25.0 / 20.0 GB/s)'")


def check_chart(path, failures):
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        failures.append(f"{path} is not an XML document: {e}")
        return
    if not root.tag.endswith("svg"):
        failures.append(f"{path}: the root element is {root.tag}, not svg")
    texts = " ".join("".join(el.itertext()) for el in root.iter() if el.tag.endswith("text"))
    for want in ("krafla", "llama.cpp", "tiny-q8 -t1", "decode tok/s"):
        if want not in texts:
            failures.append(f"{path}: no text '{want}' in the chart")
    paths = sum(1 for el in root.iter() if el.tag.endswith("path"))
    if paths < 12:  # three panels of two bars each, plus axes and frames
        failures.append(f"{path}: only {paths} path elements; no bars drawn?")


def check_weight_bytes(bp, bin_dir, work, failures):
    for wtype, block in (("q8", 34), ("q4", 18)):
        gguf = os.path.join(work, f"wb-{wtype}.gguf")
        subprocess.run([os.path.join(bin_dir, "ml_convert"), "random"] + TINY +
                       ["--max-seq", "64", "--wtype", wtype, "--scales", "f16", "-o", gguf[:-5] + ".mlb",
                        "--gguf", gguf], check=True, capture_output=True)
        got, want = bp.gguf_weight_bytes(gguf), tiny_bytes(block)
        if got != want:
            failures.append(f"weight bytes of tiny {wtype}: counted {got}, by hand {want}")
        for kv, kv_bytes in (("f16", 2), ("f32", 4)):
            got, want = bp.gguf_cache_bytes(gguf, 64, 128, kv), tiny_cache_bytes(kv_bytes, 64, 128)
            if got != want:
                failures.append(f"KV bytes of tiny {wtype} {kv}: counted {got}, by hand {want}")
    # A Qwen3.5-shaped header (metadata only): 24 layers, every 4th attends (6), 2 KV heads of 256;
    # 18 linear layers of 16 heads, state 128 x 2048 / 16, convolution 3 x (2048 + 2 x 16 x 128).
    meta = {"general.architecture": "qwen35", "qwen35.block_count": 24, "qwen35.full_attention_interval": 4,
            "qwen35.attention.head_count_kv": 2, "qwen35.attention.key_length": 256,
            "qwen35.attention.value_length": 256, "qwen35.ssm.time_step_rank": 16, "qwen35.ssm.state_size": 128,
            "qwen35.ssm.inner_size": 2048, "qwen35.ssm.group_count": 16, "qwen35.ssm.conv_kernel": 4}
    path = os.path.join(work, "qwen35-header.gguf")
    with open(path, "wb") as f:
        f.write(struct.pack("<IIQQ", 0x46554747, 3, 0, len(meta)))
        for k, v in meta.items():
            f.write(struct.pack("<Q", len(k)) + k.encode())
            if isinstance(v, str):
                f.write(struct.pack("<IQ", 8, len(v)) + v.encode())
            else:
                f.write(struct.pack("<II", 4, v))  # uint32
    want = int(6 * 2 * 512 * 2 * (64 + 129 / 2) + 18 * (16 * 128 * 128 + 3 * (2048 + 2 * 16 * 128)) * 4)
    got = bp.gguf_cache_bytes(path, 64, 128, "f16")
    if got != want:
        failures.append(f"KV + state bytes of a Qwen3.5 header: counted {got}, by hand {want}")


def check_probe_args(bin_dir, failures):
    """ml_bwprobe's bad input: exit 2 naming the option."""
    exe = os.path.join(bin_dir, "ml_bwprobe")
    for args, name in ((["--mib", "0"], "--mib"), (["--threads", "1,x"], "--threads"), (["--passes"], "--passes"),
                       (["--bogus"], "--bogus")):
        r = subprocess.run([exe] + args, capture_output=True, text=True)
        if r.returncode != 2 or name not in r.stderr:
            failures.append(f"ml_bwprobe {' '.join(args)}: exit {r.returncode}, stderr {r.stderr.strip()!r}; "
                            f"want exit 2 naming {name}")


def check_probe_modes(bin_dir, failures):
    """ml_bwprobe reports the fastest prefetch mode, naming it and the others' best."""
    exe = os.path.join(bin_dir, "ml_bwprobe")
    modes = ("no prefetch", "every line 4 KiB ahead", "page kick of 1 line", "page kick of 2 lines",
             "page kick of 4 lines")
    for extra, want_others in (([], 4), (["--no-prefetch"], 0)):
        out = subprocess.run([exe, "--mib", "64", "--passes", "2", "--threads", "1"] + extra, capture_output=True,
                             text=True).stdout
        row = re.search(r"^\| 1 \| 64 \| 2 \| ([\d.]+) \| ([\d.]+) \| [^,|]+, ([^(|]+?)(?: \((.*)\))? \|$", out, re.M)
        if not row:
            failures.append(f"ml_bwprobe {' '.join(extra)}: no '| 1 | 64 | 2 | best | median | loads, mode |' row in:\n{out}")
            continue
        best, mode, others = float(row.group(1)), row.group(3), row.group(4) or ""
        pairs = re.findall(r"([A-Za-z0-9 ]+?) ([\d.]+)(?:, |$)", others)
        if mode not in modes or len(pairs) != want_others or (extra and mode != "no prefetch"):
            failures.append(f"ml_bwprobe {' '.join(extra)}: mode '{mode}' and others {pairs} in: {row.group(0)}")
        for name, gbs in pairs:
            if name not in modes or name == mode or float(gbs) > best:
                failures.append(f"ml_bwprobe: the row's {best} GB/s ({mode}) is not the best: {name} {gbs}")


def check_foreign(bp, failures):
    py = sys.executable
    spin = subprocess.Popen([py, "-c", "import time\nt = time.time() + 6\nwhile time.time() < t: pass"])
    try:
        time.sleep(0.2)
        _, foreign, wall, own = bp.measured([py, "-c", "import time; time.sleep(1.5)"])
    finally:
        spin.kill()
        spin.wait()
    if foreign < 0.5 or own > 0.3:
        failures.append(f"a sleeping child beside a spinning process: {foreign:.2f} foreign CPUs (want >= 0.5), "
                        f"own {own:.2f} s over {wall:.2f} s")
    _, foreign, wall, own = bp.measured([py, "-c", "import time\nt = time.process_time() + 1\n"
                                             "while time.process_time() < t: pass"])
    if own < 0.9:
        failures.append(f"a CPU-bound child: own CPU {own:.2f} s over {wall:.2f} s wall (want its 1 s counted as own)")
    g = bp.Guard(-1e9, 2)  # every run is over the limit, whatever the tick slack
    g([py, "-c", "pass"], "a run that is always rejected")
    if (g.runs, g.rejected, g.kept_loaded) != (3, 2, 1):
        failures.append(f"guard with 2 retries over the limit: runs/rejected/kept {g.runs}/{g.rejected}/{g.kept_loaded}, "
                        "want 3/2/1")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--node", default="node")
    a = ap.parse_args()
    if not os.path.exists(os.path.join(HERE, "node_modules", "node-llama-cpp", "package.json")):
        print("SKIP (llama.cpp): e2e/llamacpp/node_modules is missing (scripts/install-deps runs npm ci there)")
        return 0
    os.makedirs(a.work, exist_ok=True)
    bp = load_module()
    failures = []
    out = os.path.join(a.work, "out")
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, SCRIPT, "--short", "--bin", a.bin, "--node", a.node, "--out", out,
                        "--models", os.path.join(a.work, "models")], capture_output=True, text=True)
    print(r.stderr[-3000:])
    print(r.stdout)
    print(f"bench-peers --short: exit {r.returncode} after {time.monotonic() - t0:.1f} s")
    if r.returncode != 0:
        failures.append(f"scripts/bench-peers --short exited {r.returncode}")
    else:
        with open(os.path.join(out, "peers.md")) as f:
            text = f.read()
        if text.strip() != r.stdout.strip():
            failures.append("peers.md is not what bench-peers printed")
        check_table(text, failures)
        check_chart(os.path.join(out, "peers.svg"), failures)
    check_weight_bytes(bp, a.bin, a.work, failures)
    check_around_cell(bp, failures)
    check_probe_args(a.bin, failures)
    check_probe_modes(a.bin, failures)
    check_foreign(bp, failures)
    for f in failures:
        print("FAIL:", f)
    print(f"bench-peers smoke: {'FAIL' if failures else 'ok'} ({time.monotonic() - t0:.1f} s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
