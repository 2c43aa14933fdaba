"""The ISA guard of the ARM builds under qemu-user CPU models: each executable, run on a model that
lacks its ISA, must exit 3 naming the missing feature (getauxval AT_HWCAP/AT_HWCAP2) before any ISA
instruction runs (a SIGILL would show as a signal, not exit 3); on models that have it, --help
exits 0. Every ARM build gets negative and positive cases.

Usage: test_guard_arm.py ISA BIN_DIR QEMU SYSROOT"""
import os
import subprocess
import sys

# qemu CPU model -> the ISAs it runs (qemu 7.2; ../shared/TOOLCHAIN.md section 6).
MODELS = {
    "qemu-aarch64": {
        "cortex-a53": {"neon"},
        "cortex-a76": {"neon", "neon_dotprod"},
        "max,sve=off": {"neon", "neon_dotprod", "neon_i8mm"},
        "max": {"neon", "neon_dotprod", "neon_i8mm", "sve"},
        "max,sve-max-vq=1": {"neon", "neon_dotprod", "neon_i8mm", "sve"},
    },
    "qemu-arm": {
        "cortex-r5f": set(),  # VFPv3, no NEON
        "cortex-a7": {"neon"},
        "cortex-a15": {"neon"},
    },
}
# The feature the guard must name for an ISA on a model that lacks it.
MISSING = {
    ("neon_dotprod", "cortex-a53"): "asimddp",
    ("neon_i8mm", "cortex-a53"): "asimddp",
    ("neon_i8mm", "cortex-a76"): "i8mm",
    ("sve", "cortex-a53"): "asimddp",
    ("sve", "cortex-a76"): "sve",
    ("sve", "max,sve=off"): "sve",
    ("neon", "cortex-r5f"): "neon",
}
APPS = ["ml_run", "ml_tok", "ml_convert", "ml_bench", "ml_perplexity"]


def main(isa, bin_dir, qemu, sysroot):
    models = MODELS.get(os.path.basename(qemu))
    if models is None:
        print("FAIL: no CPU models listed for %s" % qemu)
        return 1
    failures, checks, negatives = 0, 0, 0
    for model, runs in models.items():
        for app in APPS:
            exe = os.path.join(bin_dir, app)
            if not os.path.exists(exe):
                continue
            p = subprocess.run([qemu, "-L", sysroot, "-cpu", model, exe, "--help"], capture_output=True, text=True,
                               timeout=120)
            checks += 1
            if isa in runs:
                ok = p.returncode == 0
                want = "exit 0"
            else:
                negatives += 1
                need = MISSING[(isa, model)]
                ok = p.returncode == 3 and need in p.stderr and isa in p.stderr
                want = "exit 3 naming %s" % need
            print("%-4s %-17s %-10s -> exit %d %s" % ("ok" if ok else "FAIL", model, app, p.returncode,
                                                      p.stderr.strip().splitlines()[-1:] if p.returncode else ""))
            if not ok:
                print("     expected %s; stderr: %s" % (want, p.stderr.strip()[-300:]))
                failures += 1
    if negatives == 0 or negatives == checks:
        print("FAIL: every ARM build needs both negative and positive cases (%d of %d negative)" % (negatives, checks))
        failures += 1
    print("%d passed, %d failed" % (checks - failures, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
