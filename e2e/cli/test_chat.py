"""Hugging Face tokenizers inside models, from the command line: ml_convert --tokenizer with a
Hugging Face folder, ml_tok on the model giving what it gives on the folder, ml_run --chat and -i
(the session keeps the conversation's shared prefix between turns; a conversation that outgrows
the context stops with a message), and the refusals.

Usage: test_chat.py --bin DIR --shared DIR --work DIR"""
import json
import os
import re
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

ENV = None
SMOL = "data/hf/smollm2-135m-instruct/tokenizer.json"
# Qwen2.5's ChatML template (its tokenizer_config.json); SmolLM2's vocabulary has <|im_start|> and
# <|im_end|> too, so the two make a working chat model with a random body.
QWEN_CONFIG = "data/hf/qwen2.5-0.5b-instruct/tokenizer_config.json"


def folder():
    """A Hugging Face folder: SmolLM2's tokenizer.json and a tokenizer_config.json with ChatML."""
    d = ENV.path("smol-chatml")
    if not os.path.isdir(d):
        os.makedirs(d)
        shutil.copy(ENV.shared_path(SMOL), os.path.join(d, "tokenizer.json"))
        tmpl = json.load(open(ENV.shared_path(QWEN_CONFIG), encoding="utf-8"))["chat_template"]
        with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump({"chat_template": tmpl, "eos_token": "<|im_end|>", "bos_token": None}, f)
    return d


def model():
    out = ENV.path("smol-random.mlb")
    if not os.path.exists(out):
        h.run([ENV.exe("ml_convert"), "random", "--dim", "64", "--hidden", "128", "--layers", "2", "--heads", "2",
               "--kv-heads", "1", "--vocab", "49152", "--max-seq", "512", "--rope-type", "half", "--tokenizer",
               folder(), "-o", out])
    return out


class Chat(unittest.TestCase):
    def tok(self, *args, stdin=None, check=True):
        return h.run([ENV.exe("ml_tok")] + [str(a) for a in args], stdin=stdin, check=check)

    def run_ml(self, *args, stdin=None, check=True):
        return h.run([ENV.exe("ml_run")] + [str(a) for a in args], stdin=stdin, check=check)

    def test_model_tokenizer_equals_the_folder(self):
        m = model()
        for text in ["Hello world, it's 2024!", "  spaces\n\nand 你好 🌍", "<|im_start|>user\nhi<|im_end|>"]:
            self.assertEqual(self.tok(m, "encode", text)[1], self.tok(folder(), "encode", text)[1], text)
        msgs = ENV.path("msgs.json")
        with open(msgs, "w") as f:
            json.dump([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}], f)
        rendered = self.tok(m, "chat", msgs)[1]
        self.assertEqual(rendered, self.tok(folder(), "chat", msgs)[1])
        self.assertEqual(rendered, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                                   "<|im_start|>assistant\n")
        ids = self.tok(m, "chat", msgs, "--ids")[1].split()
        self.assertEqual(ids[0], "1")  # <|im_start|> is one special token, cut out before BPE

    def test_chat_one_reply(self):
        rc, out, err = self.run_ml(model(), "--chat", "-p", "Hi", "-s", "Be brief.", "-n", "6", "--temp", "0")
        self.assertEqual(rc, 0)
        self.assertRegex(err, r"\d+ new prompt tokens \(0 reused from the cache\), \d+ generated")

    def test_interactive_keeps_the_cache(self):
        m = model()
        rc, out, err = self.run_ml(m, "-i", "-n", "5", "--temp", "0", stdin="Hello there\nAnd again?\n")
        self.assertEqual(rc, 0, err)
        turns = [tuple(map(int, t)) for t in re.findall(r"(\d+) new prompt tokens \((\d+) reused from the cache\), (\d+) generated", err)]
        self.assertEqual(len(turns), 2, err)
        # Turn 1's prompt is the rendering of one user message; turn 2 reuses at least all of it.
        msgs = ENV.path("turn1.json")
        with open(msgs, "w") as f:
            json.dump([{"role": "user", "content": "Hello there"}], f)
        n1 = len(self.tok(m, "chat", msgs, "--ids")[1].split())
        self.assertEqual(turns[0], (n1, 0, turns[0][2]))
        self.assertGreaterEqual(turns[1][1], n1)
        self.assertLess(turns[1][0], n1 + 30)

    def test_interactive_outgrows_the_context(self):
        rc, out, err = self.run_ml(model(), "-i", "--ctx", "48", "-n", "4", "--temp", "0",
                                   stdin="one two three four five\nsix seven eight nine ten\neleven twelve\n")
        self.assertEqual(rc, 0, err)
        self.assertIn("no longer fits the context of 48", err)

    def test_refusals(self):
        d = folder()
        small = ENV.path("too-small.mlb")
        rc, _, err = h.run([ENV.exe("ml_convert"), "random", "--dim", "64", "--hidden", "128", "--layers", "1", "--heads",
                            "2", "--kv-heads", "1", "--vocab", "1000", "--max-seq", "64", "--tokenizer", d, "-o", small],
                           check=False)
        self.assertEqual(rc, 2, err)
        self.assertIn("more than the model's vocabulary of 1000", err)
        self.assertFalse(os.path.exists(small))
        tmpl = ENV.path("t.jinja")
        open(tmpl, "w").write("{{ messages[0].content }}")
        rc, _, err = h.run([ENV.exe("ml_convert"), "random", "--dim", "64", "--hidden", "128", "--layers", "1", "--heads",
                            "2", "--kv-heads", "1", "--vocab", "512", "--max-seq", "64", "--tokenizer",
                            ENV.shared_path("models/tok512.bin"), "--chat-template", tmpl, "-o", small], check=False)
        self.assertEqual(rc, 2, err)
        self.assertIn("no chat template", err)
        # A llama2.c model has no template: --chat needs one, and takes one from --chat-template.
        s = h.stories260k(ENV, "q8")
        rc, _, err = self.run_ml(s, "--chat", "-p", "hi", check=False)
        self.assertEqual(rc, 2)
        self.assertIn("no chat template", err)
        rc, out, err = self.run_ml(s, "--chat", "-p", "Once upon a time", "--chat-template", tmpl, "-n", "3", "--temp", "0")
        self.assertEqual(rc, 0, err)
        # Bad JSON and a broken template name what is wrong.
        rc, _, err = self.tok(d, "chat", "-", stdin="[{\"role\": }]", check=False)
        self.assertEqual(rc, 2)
        self.assertIn("messages", err)
        bad = ENV.path("bad.jinja")
        open(bad, "w").write("{% for m in messages %}{{ m.content }}")
        rc, _, err = self.tok(d, "chat", "-", "--chat-template", bad, stdin="[]", check=False)
        self.assertEqual(rc, 2)
        self.assertIn("chat template", err)
        p = subprocess.run([ENV.exe("ml_tok"), d, "encode", "-"], input=b"ok \xff bad", capture_output=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn(b"invalid UTF-8 at byte offset 3", p.stderr)


def main():
    global ENV
    ENV = h.env_from_args()[0]  # Env makes the work folder
    h.run_cases(Chat)


if __name__ == "__main__":
    main()
