"""ml_tok from the command line: encode/decode round trips through a .mlb's tokenizer and a raw
tokenizer.bin, stdin input, the ids llama2.c gives, and exit codes for bad input.

Usage: test_tok.py --bin DIR --shared DIR --work DIR"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

ENV = None


class Tok(unittest.TestCase):
    def tok(self, *args, stdin=None, check=True):
        return h.run([ENV.exe("ml_tok")] + list(args), stdin=stdin, check=check)

    def test_round_trip_through_the_model_file(self):
        m = h.stories260k(ENV, "q8")
        text = "Once upon a time, Lily's cat said \"hi\" — 42 times! 你好"
        ids = self.tok(m, "encode", text)[1].split()
        self.assertGreater(len(ids), 10)
        self.assertEqual(self.tok(m, "decode", " ".join(ids))[1], text)

    def test_stdin_and_known_ids(self):
        # SOURCES.md: llama2.c's run on stories260K greedily continues BOS with these ids, which
        # decode to "Once upon a time, there was a little girl named Lily."
        tokf = ENV.shared_path("models/tok512.bin")
        ids = "403 407 261 378 432 383 286 261 376 298 315 421 395 317 426 338"
        text = self.tok(tokf, "decode", stdin=ids)[1]
        self.assertTrue(text.startswith("Once upon a time, there was"), text)
        again = self.tok(tokf, "encode", stdin=text)[1].split()
        self.assertEqual(again, ids.split())

    def test_32000_token_vocabulary(self):
        tokf = ENV.shared_path("models/tokenizer.bin")
        out = self.tok(tokf, "encode", "Hello world")[1].split()
        self.assertEqual(out, ["15043", "3186"])  # Hugging Face's Llama 2 ids for "Hello world"

    def test_bad_input(self):
        tokf = ENV.shared_path("models/tok512.bin")
        self.assertEqual(self.tok(tokf, "decode", "1 2 x", check=False)[0], 2)
        self.assertEqual(self.tok(tokf, "decode", "99999", check=False)[0], 2)
        self.assertEqual(self.tok(tokf, "frobnicate", check=False)[0], 2)
        self.assertEqual(self.tok(ENV.path("missing.bin"), "encode", "x", check=False)[0], 1)
        self.assertEqual(self.tok("--help")[0], 0)


def main():
    global ENV
    ENV = h.env_from_args()[0]
    h.run_cases(Tok)


if __name__ == "__main__":
    main()
