#!/usr/bin/env python3
"""End-to-end checks of `ml_convert gguf` (docs/user-guide.md, "Importing a GGUF file").

usage: test_gguf.py BIN_DIR SHARED_DIR

- stories260K.gguf (llama.cpp's conversion of stories260K, F32, SentencePiece vocabulary inside)
  converted and run greedily from "Once upon a time" gives the same 60 tokens of text as
  stories260K.bin converted with `ml_convert llama2c` and tok512.bin (f16 scales, as the GGUF import
  writes), and the same logits (ml_run --dump-logits, byte for byte).
- llama-2-tiny-random.gguf (F16, dim 8, head_dim 4, the 32000-token Llama 2 vocabulary) converts
  and runs; its greedy continuation is printed (the CTest log records it) for a later comparison
  with llama.cpp, and is deterministic.
- Tiny GGUF files written here (fuzz/make_gguf_seeds.py's writer): a Q8_0 model requantized with
  --wtype q4 warns naming the tensors; damaged files and bad options exit with the documented
  codes and name the file. ml_tok on a GGUF file gives the ids, text and errors it gives on the
  converted .mlb. Python 3 standard library only.
"""
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fuzz"))
import harness as h  # noqa: E402
import make_gguf_seeds as gw  # noqa: E402

FAILURES = h.Failures()
check = FAILURES.check


def run(cmd):
    """Runs cmd; returns (returncode, stdout, stderr), whatever the exit code."""
    return h.run(cmd, check=False)


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    bin_dir, shared = sys.argv[1], sys.argv[2]
    conv, mlrun = os.path.join(bin_dir, "ml_convert"), os.path.join(bin_dir, "ml_run")
    work = tempfile.mkdtemp(prefix="krafla_e2e_gguf_")
    w = lambda n: os.path.join(work, n)
    models = os.path.join(shared, "models")

    # stories260K: the GGUF against the llama2.c checkpoint.
    gg = os.path.join(models, "stories260K-gguf", "stories260K.gguf")
    if check(os.path.exists(gg), "missing " + gg):
        rc, _, err = run([conv, "gguf", gg, "-o", w("g.mlb")])
        check(rc == 0, "gguf stories260K: exit %d: %s" % (rc, err))
        rc, _, err = run([conv, "llama2c", os.path.join(models, "stories260K.bin"), "--tokenizer",
                          os.path.join(models, "tok512.bin"), "--scales", "f16", "-o", w("l.mlb")])
        check(rc == 0, "llama2c stories260K: exit %d: %s" % (rc, err))
        texts = []
        for m in ("g.mlb", "l.mlb"):
            rc, out, err = run([mlrun, w(m), "-p", "Once upon a time", "-n", "60", "--temp", "0"])
            check(rc == 0, "ml_run %s: exit %d: %s" % (m, rc, err))
            texts.append(out)
        check(texts[0] == texts[1] and len(texts[0]) > 100,
              "stories260K.gguf and stories260K.bin give different text:\n%r\n%r" % tuple(texts))
        check(texts[0].startswith("Once upon a time"), "unexpected text %r" % texts[0][:80])
        logits = []
        for m in ("g.mlb", "l.mlb"):
            rc, _, err = run([mlrun, w(m), "-p", "Lily and Ben went to the park", "--dump-logits", w(m + ".logits")])
            check(rc == 0, "ml_run --dump-logits %s: exit %d: %s" % (m, rc, err))
            logits.append(open(w(m + ".logits"), "rb").read() if rc == 0 else b"")
        check(logits[0] == logits[1] and len(logits[0]) > 0, "stories260K: the logits differ")

    # llama-2-tiny-random: converts (dim 8 and head_dim 4 padded) and runs.
    tr = os.path.join(models, "llama-2-tiny-random-gguf", "llama-2-tiny-random.gguf")
    if check(os.path.exists(tr), "missing " + tr):
        rc, _, err = run([conv, "gguf", tr, "-o", w("t.mlb")])
        check(rc == 0, "gguf tiny-random: exit %d: %s" % (rc, err))
        outs = [run([mlrun, w("t.mlb"), "-p", "Once upon a time", "-n", "16", "--temp", "0"]) for _ in range(2)]
        check(all(o[0] == 0 for o in outs), "ml_run tiny-random failed: %s" % outs[0][2])
        check(outs[0][1] == outs[1][1] and len(outs[0][1]) > len("Once upon a time"),
              "tiny-random: greedy output not deterministic or empty: %r" % outs[0][1])
        print("tiny-random greedy:", repr(outs[0][1]))

    # A Q8_0 file requantized to Q4 warns naming the tensors; kept Q8 it does not.
    open(w("q8.gguf"), "wb").write(gw.model("llama", gw.Q8_0))
    rc, _, err = run([conv, "gguf", w("q8.gguf"), "-o", w("q8.mlb")])
    check(rc == 0 and "warning" not in err, "Q8_0 gguf: exit %d: %s" % (rc, err))
    rc, _, err = run([conv, "gguf", w("q8.gguf"), "-o", w("q4.mlb"), "--wtype", "q4"])
    check(rc == 0 and "warning" in err and "blk.0.attn_q.weight (Q8_0)" in err, "Q8_0 -> q4 warning: %d %s" % (rc, err))

    # Errors: exit 1 for I/O, 2 for bad contents and options, the file named.
    bad = bytearray(gw.model("llama", gw.F32))
    bad[0:4] = b"GGUX"
    open(w("bad.gguf"), "wb").write(bad)
    cases = [
        (1, "nonexistent.gguf", [w("nonexistent.gguf")]),
        (2, "bad.gguf", [w("bad.gguf")]),
        (2, "--chat-template", [w("q8.gguf"), "--chat-template", w("bad.gguf")]),
    ]
    open(w("spm.gguf"), "wb").write(gw.model("llama", gw.F32, tok=gw.spm(8)))
    cases.append((2, "chat template", [w("spm.gguf"), "--chat-template", w("bad.gguf")]))
    open(w("t.jinja"), "w").write("{% for m in messages %}[{{ m.content }}]{% endfor %}")
    rc, _, err = run([conv, "gguf", w("spm.gguf"), "--chat-template", w("t.jinja"), "-o", w("spm.mlb")])
    check(rc == 0, "SentencePiece GGUF with --chat-template: exit %d: %s" % (rc, err))
    for code, needle, args in cases:
        rc, _, err = run([conv, "gguf"] + args + ["-o", w("x.mlb")])
        check(rc == code and needle in err, "ml_convert gguf %s: exit %d (want %d): %s" % (args, rc, code, err))
    rc, _, err = run([conv, "gguf", w("q8.gguf"), "-o", w("x.mlb"), "--wtype", "q5"])
    check(rc == 2, "--wtype q5: exit %d" % rc)

    # ml_tok on a GGUF file reads only its tokenizer: the same ids, text and errors as on the
    # converted .mlb (SentencePiece as tokenizer.bin and as tokenizer.json, byte-level BPE, none).
    tok = os.path.join(bin_dir, "ml_tok")
    open(w("bpe.gguf"), "wb").write(gw.model("qwen2", gw.F16, tok=gw.bpe("qwen2")))
    open(w("spm_json.gguf"), "wb").write(gw.model("llama", gw.F32, tok=gw.spm(8) + [
        gw.kv("tokenizer.chat_template", 8, "{{ messages[0].content }}")]))
    open(w("none.gguf"), "wb").write(gw.model("llama", gw.F32))
    files = [w("spm.gguf"), w("spm_json.gguf"), w("bpe.gguf"), w("none.gguf")] + [f for f in (gg, tr) if os.path.exists(f)]
    text = "Once upon a time, \u00e9t\u00e9 42 <s>!"
    for i, f in enumerate(files):
        mlb = w("tok%d.mlb" % i)
        rc, _, err = run([conv, "gguf", f, "-o", mlb])
        check(rc == 0, "gguf %s: exit %d: %s" % (f, rc, err))
        for args in (["encode", text], ["encode", text, "--add-special"], ["decode", "0 1 2 3 4 5"]):
            a, b = run([tok, f] + args), run([tok, mlb] + args)
            # The messages name the file given; the rest must agree.
            same = (a[0], a[1], a[2].replace(f, "FILE")) == (b[0], b[1], b[2].replace(mlb, "FILE"))
            check(same, "ml_tok %s %s: the GGUF gives %r, its .mlb %r" % (os.path.basename(f), args, a, b))
        if f == w("none.gguf"):
            check(run([tok, f, "encode", "x"])[0] != 0, "ml_tok on a GGUF without a tokenizer succeeded")

    if FAILURES:
        print("%d failure(s); work folder kept: %s" % (len(FAILURES), work))
        return 1
    shutil.rmtree(work, ignore_errors=True)
    print("e2e.gguf: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
