"""The ISA guard under qemu-x86_64: each build's executables, run on CPU models that lack its
instruction set, must exit 3 naming the missing feature before any ISA instruction runs (static
initialisers included: a SIGILL would show as a signal, not exit 3); on models that have it they
must run (--help exits 0). qemu 7.2's TCG emulates up to AVX2, so the AVX-VNNI, AVX-512 and AMX
builds get only negative cases there; their positive case is this machine itself, when it has them.

Usage: test_guard.py ISA BIN_DIR"""
import os
import shutil
import subprocess
import sys

# qemu CPU model -> the x86 ISAs it runs.
MODELS = {
    "core2duo": {"scalar", "sse2"},
    "Nehalem": {"scalar", "sse2", "sse41"},
    "SandyBridge": {"scalar", "sse2", "sse41"},
    "Haswell": {"scalar", "sse2", "sse41", "avx2"},
}
# The feature the guard must name for an ISA on a model that lacks it.
MISSING = {
    ("sse41", "core2duo"): "sse4.1",
    ("avx2", "core2duo"): "sse4.1",
    ("avx2", "Nehalem"): "avx",
    ("avx2", "SandyBridge"): "fma",
    ("avxvnni", "Haswell"): "avxvnni",
    ("avxvnni", "SandyBridge"): "fma",
    ("avx512vnni", "Haswell"): "avx512f",
    ("avx512vnni", "Nehalem"): "avx",
    ("amx", "Haswell"): "avx512f",
    ("amx", "Nehalem"): "avx",
}
APPS = ["ml_run", "ml_tok", "ml_convert", "ml_bench", "ml_perplexity"]
# /proc/cpuinfo flags each ISA needs (src/core/isa_check.cpp's list, as the kernel names them).
HOST_FLAGS = {
    "sse2": ["sse2"],
    "sse41": ["sse2", "ssse3", "sse4_1"],
    "avx2": ["sse2", "ssse3", "sse4_1", "avx", "fma", "f16c", "avx2"],
}
HOST_FLAGS["avxvnni"] = HOST_FLAGS["avx2"] + ["avx_vnni"]
HOST_FLAGS["avx512vnni"] = HOST_FLAGS["avx2"] + ["avx512f", "avx512bw", "avx512vl", "avx512_vnni"]
# amx also needs Linux to grant the tile data (arch_prctl): /proc/cpuinfo lists the flags only
# where the kernel supports AMX.
HOST_FLAGS["amx"] = HOST_FLAGS["avx512vnni"] + ["amx_tile", "amx_int8"]


def host_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def main(isa, bin_dir):
    qemu = shutil.which("qemu-x86_64")
    if not qemu:
        print("SKIP: qemu-x86_64 is not installed (apt-get install qemu-user)")
        return 1  # scripts/install-deps installs it: a missing emulator is a failure, not a pass
    failures, checks = 0, 0
    for model, runs in MODELS.items():
        for app in APPS:
            exe = os.path.join(bin_dir, app)
            if not os.path.exists(exe):
                continue
            p = subprocess.run([qemu, "-cpu", model, exe, "--help"], capture_output=True, text=True, timeout=120)
            checks += 1
            if isa in runs:
                ok = p.returncode == 0
                want = "exit 0"
            else:
                need = MISSING.get((isa, model))
                ok = p.returncode == 3 and (need is None or need in p.stderr) and isa in p.stderr
                want = "exit 3 naming %s" % (need or "the missing feature")
            print("%-4s %-11s %-10s -> exit %d %s" % ("ok" if ok else "FAIL", model, app, p.returncode,
                                                      p.stderr.strip().splitlines()[-1:] if p.returncode else ""))
            if not ok:
                print("     expected %s; stderr: %s" % (want, p.stderr.strip()[-300:]))
                failures += 1
    # The host, natively: the positive case for the builds qemu cannot run where the host has the
    # ISA (the kernel's /proc/cpuinfo flags, which include the OS's XSAVE support, say so), and one
    # more negative case where it has not.
    lacking = [f for f in HOST_FLAGS.get(isa, []) if f not in host_flags()]
    p = subprocess.run([os.path.join(bin_dir, "ml_run"), "--help"], capture_output=True, text=True)
    checks += 1
    ok = p.returncode == 0 if not lacking else p.returncode == 3 and isa in p.stderr
    print("%-4s host        ml_run     -> exit %d (host lacks %s) %s" % (
        "ok" if ok else "FAIL", p.returncode, " ".join(lacking) or "nothing", p.stderr.strip()))
    if not ok:
        failures += 1
    print("%d passed, %d failed" % (checks - failures, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
