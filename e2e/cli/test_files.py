"""How the programs treat the files they read and write (docs/reliability.md, "Files"): an output
that is one of the inputs, a FIFO as an input, a device, directory or FIFO as an output, a signal
in the middle of writing, and a write that fails (a full disk, simulated with RLIMIT_FSIZE).

Every special file is made in a scratch folder of the test's own (mkfifo, mknod), never /dev.

Usage: test_files.py --bin DIR --shared DIR --work DIR"""
import argparse
import hashlib
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

ENV = None
IDS = "1 403 407"  # the repro; stories260K has 512 tokens
SMALL = ["--dim", "64", "--hidden", "128", "--layers", "1", "--heads", "2", "--kv-heads", "2", "--vocab", "512",
         "--max-seq", "16"]


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def run(args, timeout=60, preexec_fn=None):
    """Runs args; returns (returncode, stderr). A program that hangs fails the test (it is killed)."""
    try:
        p = subprocess.run([str(a) for a in args], capture_output=True, text=True, errors="replace",
                           timeout=timeout, preexec_fn=preexec_fn)
    except subprocess.TimeoutExpired:
        raise AssertionError("hung for %d s (killed): %s" % (timeout, " ".join(map(str, args))))
    return p.returncode, p.stderr


class Case(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="files_", dir=ENV.work)

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def p(self, name):
        return os.path.join(self.dir, name)

    def model(self, name="m.mlb"):
        """A private copy of stories260K (q8), so a test that destroys it harms no other."""
        out = self.p(name)
        shutil.copyfile(h.stories260k(ENV, "q8"), out)
        return out

    def leftovers(self, keep):
        """Files in the scratch folder other than keep (temporary files, partial outputs)."""
        return sorted(set(os.listdir(self.dir)) - set(keep))

    def expect(self, args, code, needles=(), timeout=60, preexec_fn=None):
        rc, err = run(args, timeout, preexec_fn)
        self.assertEqual(rc, code, "%s: stderr %r" % (" ".join(map(str, args)), err[-800:]))
        for n in needles:
            self.assertIn(n, err)
        return err

    def mknod_chr(self, name):
        """A character device node like /dev/full (1, 7) in the scratch folder; skips when this
        user may not make one."""
        path = self.p(name)
        try:
            os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
        except PermissionError:
            self.skipTest("mknod needs root")
        return path


class SameFile(Case):
    """An output that is the same file (st_dev, st_ino) as an input is refused before anything is
    written: exit 2, the message names both, the input is unchanged. (Before: --dump-logits onto the
    model truncated the mapped file, died of SIGBUS and left the model at 0 bytes.)"""

    def check_model_refused(self, extra):
        m = self.model()
        before = digest(m)
        err = self.expect([ENV.exe("ml_run"), m, "--tokens", IDS, "--dump-logits", m] + extra, 2, [m, "same file"])
        self.assertEqual(digest(m), before)
        self.assertEqual(self.leftovers(["m.mlb"]), [], err)
        # Another name for the same inode (a hard link): the message names both.
        alias = self.p("alias.mlb")
        os.link(m, alias)
        self.expect([ENV.exe("ml_run"), m, "--tokens", IDS, "--dump-logits", alias] + extra, 2, [m, alias])
        self.assertEqual(digest(m), before)

    def test_dump_logits_onto_the_model(self): self.check_model_refused([])
    def test_dump_logits_onto_the_model_no_pack(self): self.check_model_refused(["--no-pack"])

    def test_dump_logits_onto_the_tokenizer(self):
        m = self.model()
        tok = self.p("tok.bin")
        shutil.copyfile(ENV.shared_path("models/tok512.bin"), tok)
        before = digest(tok)
        self.expect([ENV.exe("ml_run"), m, "-z", tok, "--tokens", IDS, "--dump-logits", tok], 2, [tok, "same file"])
        self.assertEqual(digest(tok), before)

    def test_convert_onto_its_checkpoint_or_tokenizer(self):
        ckpt, tok = self.p("ckpt.bin"), self.p("tok.bin")
        shutil.copyfile(ENV.shared_path("models/stories260K.bin"), ckpt)
        shutil.copyfile(ENV.shared_path("models/tok512.bin"), tok)
        sums = digest(ckpt), digest(tok)
        for out in (ckpt, tok):
            self.expect([ENV.exe("ml_convert"), "llama2c", ckpt, "--tokenizer", tok, "-o", out], 2, [out, "same file"])
        self.expect([ENV.exe("ml_convert"), "random"] + SMALL + ["--tokenizer", tok, "-o", tok], 2, [tok, "same file"])
        self.assertEqual((digest(ckpt), digest(tok)), sums)
        self.assertEqual(self.leftovers(["ckpt.bin", "tok.bin"]), [])

    def test_dump_logits_replaces_a_regular_file_and_writes_through_a_link(self):
        m = self.model()
        out, link = self.p("out.bin"), self.p("link.bin")
        with open(out, "wb") as f:
            f.write(b"old")
        os.chmod(out, 0o640)
        self.expect([ENV.exe("ml_run"), m, "--tokens", IDS, "--dump-logits", out], 0)
        self.assertEqual(os.path.getsize(out), 3 * 512 * 4)
        self.assertEqual(stat.S_IMODE(os.stat(out).st_mode), 0o640)
        os.symlink("out.bin", link)
        os.remove(out)
        with open(out, "wb") as f:
            f.write(b"old")
        self.expect([ENV.exe("ml_run"), m, "--tokens", IDS, "--dump-logits", link], 0)
        self.assertTrue(os.path.islink(link))
        self.assertEqual(os.path.getsize(out), 3 * 512 * 4)
        self.assertEqual(self.leftovers(["m.mlb", "out.bin", "link.bin"]), [])


class FifoInput(Case):
    """Every input path that is a FIFO is refused at once (exit 2, naming the path), instead of
    open() waiting forever for a writer."""

    def fifo(self):
        path = self.p("fifo")
        os.mkfifo(path)
        return path

    def test_every_input(self):
        f = self.fifo()
        m = self.model()
        ckpt, tok = ENV.shared_path("models/stories260K.bin"), ENV.shared_path("models/tok512.bin")
        for args in ([ENV.exe("ml_run"), f, "-p", "hi"],
                     [ENV.exe("ml_run"), m, "-z", f, "-p", "hi", "-n", "1"],
                     [ENV.exe("ml_tok"), f, "encode", "hi"],
                     [ENV.exe("ml_bench"), "--model", f, "--no-kernels"],
                     [ENV.exe("ml_convert"), "llama2c", f, "--tokenizer", tok, "-o", self.p("o.mlb")],
                     [ENV.exe("ml_convert"), "llama2c", ckpt, "--tokenizer", f, "-o", self.p("o.mlb")],
                     [ENV.exe("ml_convert"), "random"] + SMALL + ["--tokenizer", f, "-o", self.p("o.mlb")]):
            self.expect(args, 2, [f, "FIFO"], timeout=20)
        self.assertEqual(self.leftovers(["fifo", "m.mlb"]), [])


class SpecialOutput(Case):
    """An output must be a regular file or a new path: a device node, a directory or a FIFO is
    refused (exit 2) and left as it was. (Before: as root, -o to a /dev/full node exited 0 and
    renamed the model over the node.)"""

    def convert(self, out, code=2, needles=()):
        return self.expect([ENV.exe("ml_convert"), "random"] + SMALL + ["-o", out], code, needles, timeout=20)

    def test_char_device(self):
        node = self.mknod_chr("full")
        self.convert(node, 2, [node, "character device"])
        self.assertTrue(stat.S_ISCHR(os.lstat(node).st_mode))
        m = self.model()
        self.expect([ENV.exe("ml_run"), m, "--tokens", IDS, "--dump-logits", node], 2, [node, "character device"])
        self.assertTrue(stat.S_ISCHR(os.lstat(node).st_mode))
        self.assertEqual(self.leftovers(["full", "m.mlb"]), [])

    def test_directory(self):
        d = self.p("d")
        os.mkdir(d)
        self.convert(d, 2, [d, "directory"])
        self.assertTrue(os.path.isdir(d))
        self.assertEqual(os.listdir(d), [])
        self.assertEqual(self.leftovers(["d"]), [])

    def test_fifo(self):
        f = self.p("fifo")
        os.mkfifo(f)
        self.convert(f, 2, [f, "FIFO"])
        m = self.model()
        self.expect([ENV.exe("ml_run"), m, "--tokens", IDS, "--dump-logits", f], 2, [f, "FIFO"], timeout=20)
        self.assertTrue(stat.S_ISFIFO(os.lstat(f).st_mode))
        self.assertEqual(self.leftovers(["fifo", "m.mlb"]), [])


class Signal(Case):
    """SIGTERM or SIGINT while ml_convert writes removes its temporary file, and the process dies of
    that signal. (Before: a multi-GB big.mlb.tmp.<pid> stayed behind.)"""

    # About 480 MB (4096 layers, the most the format allows): long enough to write (and fsync)
    # that the signal lands while the temporary file exists; the model is built in memory first.
    BIG = ["--dim", "128", "--hidden", "128", "--layers", "4096", "--heads", "1", "--kv-heads", "1", "--vocab", "32",
           "--max-seq", "8"]

    def check(self, sig):
        out = self.p("big.mlb")
        p = subprocess.Popen([ENV.exe("ml_convert"), "random"] + self.BIG + ["-o", out], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
        tmp = "%s.tmp.%d" % (out, p.pid)
        deadline = time.time() + 120
        while not os.path.exists(tmp) and p.poll() is None and time.time() < deadline:
            time.sleep(0.001)
        if not os.path.exists(tmp):
            p.kill()
            p.wait()
            self.fail("the temporary file %s never appeared (exit %s)" % (tmp, p.returncode))
        p.send_signal(sig)
        rc = p.wait(timeout=60)
        p.stderr.close()
        self.assertEqual(rc, -sig, "exit %d: the process should die of the signal" % rc)
        self.assertFalse(os.path.exists(tmp), "the temporary file is still there")
        self.assertEqual(self.leftovers([]), [])

    def test_sigterm(self): self.check(signal.SIGTERM)
    def test_sigint(self): self.check(signal.SIGINT)


def fsize_limit(n):
    """preexec_fn: writes past n bytes fail with EFBIG (SIGXFSZ ignored), like a full disk."""
    def apply():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (n, n))
    return apply


class FailedWrite(Case):
    """A write that fails leaves nothing: no partial file, no temporary file, and an existing
    target unchanged; exit 1 naming the file. (Before: --dump-logits left a partial file.)"""

    def test_dump_logits(self):
        m = self.model()
        out = self.p("logits.bin")
        args = [ENV.exe("ml_run"), m, "--tokens", IDS, "--dump-logits", out]
        rc, err = run(args, preexec_fn=fsize_limit(4096))  # 6144 bytes to write
        self.assertEqual(self.leftovers(["m.mlb"]), [], "a partial file is left: " + err)
        self.assertEqual(rc, 1, err)
        self.assertIn(out, err)
        self.assertIn("File too large", err)
        with open(out, "wb") as f:
            f.write(b"old logits")
        rc, err = run(args, preexec_fn=fsize_limit(4096))
        with open(out, "rb") as f:
            self.assertEqual(f.read(), b"old logits", "the target changed: " + err)
        self.assertEqual(self.leftovers(["m.mlb", "logits.bin"]), [])
        self.assertEqual(rc, 1, err)

    def test_convert(self):
        out = self.p("o.mlb")
        with open(out, "wb") as f:
            f.write(b"old model")
        self.expect([ENV.exe("ml_convert"), "random"] + SMALL + ["-o", out], 1, [out, "File too large"],
                    preexec_fn=fsize_limit(20000))
        with open(out, "rb") as f:
            self.assertEqual(f.read(), b"old model")
        self.assertEqual(self.leftovers(["o.mlb"]), [])


def main():
    global ENV
    ap = argparse.ArgumentParser()
    ap.add_argument("rest", nargs="*")
    ENV, a = h.env_from_args(ap)
    h.skip_if_cpu_lacks_isa(ENV)
    unittest.main(argv=[sys.argv[0], "-v"] + a.rest)


if __name__ == "__main__":
    main()
