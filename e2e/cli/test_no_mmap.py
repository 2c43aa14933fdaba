#!/usr/bin/env python3
"""ML_NO_MMAP (the model read into an aligned buffer instead of mapped): ml_run_no_mmap, ml_run
built with core/file.cpp compiled with ML_NO_MMAP=1 (native/CMakeLists.txt), writes byte for byte
the greedy and seeded text of ml_run and the same error for a missing model; and it really maps
nothing: `nm -u` lists mmap among ml_run's undefined symbols, not among its own.

usage: test_no_mmap.py --bin BIN --shared SHARED --work WORK"""
import os
import shutil
import subprocess
import unittest

import harness as h

ENV, _ = h.env_from_args()


def undefined(exe):
    nm = shutil.which("nm")
    out = subprocess.run([nm, "-u", exe], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}


class NoMmap(unittest.TestCase):
    def test_same_text_as_the_mapping_build(self):
        m = h.stories260k(ENV, "q8")
        cases = [["-p", "Once upon a time", "--temp", "0", "-n", "120"],
                 ["-p", "Once upon a time", "--temp", "0.9", "--seed", "42", "-n", "120"],
                 ["-p", "The cat", "--temp", "0", "-n", "60", "-t", "2"]]
        for args in cases:
            mapped = h.run([ENV.exe("ml_run"), m] + args)[1]
            read = h.run([ENV.exe("ml_run_no_mmap"), m] + args)[1]
            self.assertTrue(len(mapped) > 100, mapped)
            self.assertEqual(read, mapped, args)

    def test_maps_nothing(self):
        if os.environ.get("KRAFLA_E2E_SANITIZED"):
            # The sanitizer runtime linked into the executables defines mmap (its interceptor), so
            # neither build imports it: the symbol check says nothing there.
            self.skipTest("sanitizer build: mmap is the runtime's interceptor, not an import")
        self.assertIn("mmap", undefined(ENV.exe("ml_run")))
        self.assertNotIn("mmap", undefined(ENV.exe("ml_run_no_mmap")))
        self.assertNotIn("mmap64", undefined(ENV.exe("ml_run_no_mmap")))

    def test_missing_model_is_the_same_error(self):
        bad = ENV.path("no-such-model.mlb")
        a = h.run([ENV.exe("ml_run"), bad, "-n", "1"], check=False)
        b = h.run([ENV.exe("ml_run_no_mmap"), bad, "-n", "1"], check=False)
        self.assertNotEqual(a[0], 0)
        self.assertEqual((a[0], a[2].replace("ml_run_no_mmap", "ml_run")), (b[0], b[2].replace("ml_run_no_mmap", "ml_run")))


if __name__ == "__main__":
    h.run_cases(NoMmap)
