"""Fails when a library compiled with the build's ISA flags holds a namespace-scope object with a
dynamic initialiser. Such an initialiser runs before main(), so before native/main_guard.cpp
checks the CPU, and could execute an instruction the CPU lacks (DESIGN.md, "ISA guard").

Usage: check_static_init.py LIB.a [LIB.a ...]   (ML_NM: the nm to use, e.g. llvm-nm for wasm objects)"""
import os
import subprocess
import sys


def main(libs):
    bad = []
    for lib in libs:
        nm = os.environ.get("ML_NM") or "nm"
        out = subprocess.run([nm, "-A", "--defined-only", lib], capture_output=True, text=True, check=True).stdout
        bad += [line for line in out.splitlines() if "_GLOBAL__sub_I" in line or ".init_array" in line]
    for line in bad:
        print("dynamic initialiser in ISA-compiled code:", line)
    print("checked %d libraries: %s" % (len(libs), "FAIL" if bad else "ok"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
