#!/usr/bin/env python3
"""Runs one libFuzzer harness of fuzz/ (docs/reliability.md, "Fuzzing").

  run.py NAME --bin BUILD/bin --seconds S --work DIR [--shared DIR] [--json FILE]

It replays the committed corpus fuzz/corpus/NAME/ (regression inputs included: a crash there
fails the run), adds the seeds generated from shared/ (converted models, the checkpoint), then
fuzzes for S seconds (0: replay only). The growing corpus lives in DIR/NAME/corpus and is kept
between runs; crashes go to DIR/NAME/artifacts/. Prints one summary line (executions, libFuzzer's
cov and ft, corpus size, findings) and, with --json, writes it as JSON for scripts/fuzz.
Exit status: 0 when nothing was found, 1 on a finding (the reproducer's path is printed).
Uses the Python standard library only."""
import argparse
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# Per harness: libFuzzer options beyond the common ones.
OPTIONS = {
    "mlb_load": ["-max_len=65536"],
    "mlb_header": ["-max_len=1024"],
    "tokenizer_bin": ["-max_len=65536"],
    "llama2c": ["-max_len=65536"],
    "safetensors": ["-max_len=16384"],
    "gguf": ["-max_len=65536"],
    "hf_config": ["-max_len=8192"],
    "tok_text": ["-max_len=4096"],
    "pack_cache": [],
    "hf_tokenizer": ["-max_len=65536"],
    "hf_encode": ["-max_len=4096"],
    "chat_template": ["-max_len=16384"],
    "server_api": ["-max_len=16384"],
    "http_request": ["-max_len=8192"],
    "json": ["-max_len=131072"],
    "cli_run": ["-max_len=512", "-close_fd_mask=2"],
    "cli_tok": ["-max_len=512", "-close_fd_mask=2"],
    "cli_convert": ["-max_len=512", "-close_fd_mask=2"],
    "cli_bench": ["-max_len=512", "-close_fd_mask=2"],
    "cli_perplexity": ["-max_len=512", "-close_fd_mask=2"],
}
CLI_APP = {"cli_run": "ml_run", "cli_tok": "ml_tok", "cli_convert": "ml_convert", "cli_bench": "ml_bench",
           "cli_perplexity": "ml_perplexity"}


def gen_seeds(name, a, seeds):
    """Seeds from shared/ that are too large to commit, made fresh by this build's ml_convert."""
    models = os.path.join(a.shared, "models")
    ckpt, tok = os.path.join(models, "stories260K.bin"), os.path.join(models, "tok512.bin")
    have = os.path.exists(ckpt) and os.path.exists(tok)
    if name == "mlb_load" and have:
        for wtype, scales in (("q8", "f32"), ("q4", "f16")):
            out = os.path.join(seeds, "stories260K_%s_%s.mlb" % (wtype, scales))
            if not os.path.exists(out):
                subprocess.run([os.path.join(a.bin, "ml_convert"), "llama2c", ckpt, "--tokenizer", tok, "-o", out,
                                "--wtype", wtype, "--scales", scales], check=True, capture_output=True)
    if name == "llama2c" and have:
        out = os.path.join(seeds, "stories260K")
        if not os.path.exists(out):
            c = open(ckpt, "rb").read()
            open(out, "wb").write(b"\0" + struct.pack("<I", len(c)) + c + open(tok, "rb").read())
    if name == "hf_config":
        # The real config.json files (about 1 KB each), generation_config.json appended after a NUL.
        hf = os.path.join(a.shared, "data", "hf")
        if os.path.isdir(hf):
            for d in sorted(os.listdir(hf)):
                for c in ("config.json", "config.reconstructed.json"):
                    src = os.path.join(hf, d, c)
                    if os.path.exists(src):
                        data = open(src, "rb").read()
                        g = os.path.join(hf, d, "generation_config.json")
                        if os.path.exists(g):
                            data += b"\0" + open(g, "rb").read()
                        open(os.path.join(seeds, d + ".json"), "wb").write(data)
    if name == "tokenizer_bin":
        big = os.path.join(models, "tokenizer.bin")
        if os.path.exists(big):
            shutil.copy(big, os.path.join(seeds, "tokenizer32000.bin"))
    if name == "hf_tokenizer":
        # The real tokenizer.json files (2 MB and 86 KB): mutations of them reach every component.
        for rel, fname in (("data/hf/smollm2-135m-instruct/tokenizer.json", "smollm2.json"),
                           ("models/tinystories-656k-hf/tokenizer.json", "tinystories.json")):
            src = os.path.join(a.shared, rel)
            if os.path.exists(src):
                shutil.copy(src, os.path.join(seeds, fname))
    if name == "chat_template":
        # The real chat templates: tokenizer_config.json's chat_template fields and .jinja files.
        hf = os.path.join(a.shared, "data", "hf")
        for root, _, files in os.walk(hf):
            for f in files:
                path = os.path.join(root, f)
                if f.endswith(".jinja"):
                    shutil.copy(path, os.path.join(seeds, f))
                elif f.startswith("tokenizer_config") and f.endswith(".json"):
                    t = json.load(open(path, encoding="utf-8")).get("chat_template")
                    if isinstance(t, str):
                        open(os.path.join(seeds, os.path.basename(root) + ".jinja"), "w", encoding="utf-8").write(t)
        mine = os.path.join(os.path.dirname(HERE), "tests", "data", "chat_templates")
        if os.path.isdir(mine):
            for f in os.listdir(mine):
                if f.endswith(".jinja"):
                    shutil.copy(os.path.join(mine, f), os.path.join(seeds, f))
    if name == "json":
        # JSONTestSuite's parsing cases and a real tokenizer.json (86 KB), plus a dictionary of
        # JSON's tokens and the escapes and numbers at the reader's edges.
        suite = os.path.join(a.shared, "data", "JSONTestSuite", "test_parsing")
        if os.path.isdir(suite):
            for f in sorted(os.listdir(suite)):
                shutil.copy(os.path.join(suite, f), os.path.join(seeds, f))
        tj = os.path.join(models, "tinystories-656k-hf", "tokenizer.json")
        if os.path.exists(tj):
            shutil.copy(tj, os.path.join(seeds, "tinystories-656k-tokenizer.json"))
        words = [b"true", b"false", b"null", b"{", b"}", b"[", b"]", b":", b",", b'"', b"\\", b"\\u", b"\\ud83d\\ude00",
                 b"\\ud800", b"\\udc00", b"\\u0000", b"-0", b"1e400", b"-1e-400", b"9223372036854775807",
                 b"-9223372036854775808", b"9223372036854775808", b"0.1e1", b"1E+2", b"\xc3\xa9", b"\xed\xa0\x80",
                 b"\xf4\x8f\xbf\xbf", b"\xf4\x90\x80\x80", b"\xc0\x80", b" \t\r\n"]
        path = os.path.join(a.work, name, "json.dict")
        with open(path, "w") as f:
            for w in words:  # libFuzzer's escapes: \\, \" and \xNN
                f.write('"%s"\n' % "".join("\\" + chr(c) if c in b'\\"' else chr(c) if 32 <= c < 127 else "\\x%02X" % c
                                           for c in w))
        return ["-dict=" + path]
    if name == "server_api":
        # JSONTestSuite's parsing cases (as bodies) and a dictionary of the API's field names and values.
        suite = os.path.join(a.shared, "data", "JSONTestSuite", "test_parsing")
        if os.path.isdir(suite):
            for f in sorted(os.listdir(suite)):
                shutil.copy(os.path.join(suite, f), os.path.join(seeds, f))
        words = [w.encode() for w in (
            "messages", "role", "content", "system", "developer", "user", "assistant", "tool", "type", "text", "image_url",
            "model", "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "min_p", "seed", "stop",
            "stream", "stream_options", "include_usage", "logprobs", "top_logprobs", "n", "presence_penalty",
            "frequency_penalty", "response_format", "json_object", "json_schema", "tools", "tool_choice", "tool_calls",
            "functions", "function_call", "none", "auto", "required", "logit_bias", "grammar", "audio", "modalities",
            "chat_template_kwargs", "prompt", "echo", "suffix", "best_of", "add_special", "with_pieces", "tokens",
            "null", "true", "false", "-1", "0", "1", "2", "2.5", "1e999", "-0", "1e30", "2147483648",
            "18446744073709551615", "-9223372036854775808")]
        words += [b"\\u0000", b"\\ud800", b"\\ud83d\\ude00", b"\xc3", b"\xe2\x82", b'"', b"{", b"}", b"[", b"]"]
        return ["-dict=" + write_bytes_dict(a, name, "api.dict", words)]
    if name == "http_request":
        # A dictionary of request lines, header names and framing values.
        words = [w.encode() for w in (
            "GET ", "POST ", "HEAD ", "OPTIONS ", "PUT ", " HTTP/1.1\r\n", " HTTP/1.0\r\n", "\r\n", "\r\n\r\n", "\n",
            "/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/metrics", "/tokenize",
            "/detokenize", "Host: x\r\n", "Content-Length: ", "Transfer-Encoding: chunked\r\n",
            "Transfer-Encoding: ", "Expect: 100-continue\r\n", "Connection: close\r\n",
            "Connection: keep-alive\r\n", "Authorization: Bearer sk-fuzz\r\n", "Authorization: Bearer ",
            "Content-Type: application/json\r\n", "Content-Type: multipart/form-data; boundary=b\r\n",
            "Origin: https://example.org\r\n", "Range: bytes=0-1\r\n", "Accept: */*\r\n", "0\r\n\r\n",
            "ffffffffffffffff", "-1", "4097", "{\"messages\":[]}", "{\"prompt\":\"hi\"}")]
        return ["-dict=" + write_bytes_dict(a, name, "http.dict", words)]
    if name in CLI_APP:
        # A dictionary of the program's option names and choices, from its --help.
        out = subprocess.run([os.path.join(a.bin, CLI_APP[name]), "--help"], capture_output=True, text=True).stdout
        words = set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", out))
        words |= {"m.mlb", "r.mlb", "tok.bin", "ck.bin", "encode", "decode", "llama2c", "random", "hf", "q8", "q4", "f16",
                  "f32", "half", "interleaved", "-1", "0", "1", "4294967296", "nan", "inf", "1e40", "0x7fffffff"}
        return ["-dict=" + write_dict(a, name, sorted(words))]
    return []


def write_bytes_dict(a, name, fname, words):
    """A libFuzzer dictionary of byte strings; its escapes are \\\\, \\" and \\xNN only."""
    path = os.path.join(a.work, name, fname)
    with open(path, "w") as f:
        for w in words:
            f.write('"%s"\n' % "".join("\\" + chr(c) if c in b'\\"' else chr(c) if 32 <= c < 127 else "\\x%02X" % c
                                       for c in w))
    return path


def write_dict(a, name, words):
    path = os.path.join(a.work, name, "options.dict")
    with open(path, "w") as f:
        for w in words:
            # libFuzzer's dictionary escapes are \\, \" and \xNN only: each word ends in a newline,
            # the harnesses' argument separator.
            f.write('"%s\\x0A"\n' % w.replace("\\", "\\\\").replace('"', '\\"'))
    return path


def cpu_lacks_isa(a):
    guard = os.path.join(a.bin, "ml_tok")
    if not os.path.exists(guard):
        return None
    r = subprocess.run([guard, "--help"], capture_output=True, text=True)
    return r.stderr.strip() if r.returncode == 3 else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("name", choices=sorted(OPTIONS))
    ap.add_argument("--bin", required=True)
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--work", required=True)
    ap.add_argument("--shared", default=os.environ.get("KRAFLA_SHARED", os.path.join(HERE, "..", "..", "shared")))
    ap.add_argument("--json")
    ap.add_argument("--fresh", action="store_true", help="start from the seeds alone (drop the kept corpus)")
    a = ap.parse_args()
    a.bin, a.work, a.shared = os.path.abspath(a.bin), os.path.abspath(a.work), os.path.abspath(a.shared)

    missing = cpu_lacks_isa(a)
    if missing:
        print("SKIP (CPU): " + missing)
        return 0
    d = os.path.join(a.work, a.name)
    corpus, seeds, artifacts = (os.path.join(d, x) for x in ("corpus", "seeds", "artifacts"))
    if a.fresh:
        shutil.rmtree(corpus, ignore_errors=True)
    for x in (corpus, seeds, artifacts):
        os.makedirs(x, exist_ok=True)
    extra = gen_seeds(a.name, a, seeds)
    committed = os.path.join(HERE, "corpus", a.name)
    dirs = [corpus, seeds] + ([committed] if os.path.isdir(committed) else [])
    env = dict(os.environ, ML_FUZZ_SEED_DIR=seeds, KRAFLA_SHARED=a.shared,
               ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=0:" + os.environ.get("ASAN_OPTIONS", ""),
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:" + os.environ.get("UBSAN_OPTIONS", ""))
    if a.name == "pack_cache" and os.access("/dev/shm", os.W_OK):
        # Its model and cache in memory: every repack fsyncs the rewritten cache, which on a disk
        # holds it to about 100 runs a second (about 900 on tmpfs).
        env["TMPDIR"] = "/dev/shm"
    before = set(os.listdir(artifacts))
    cmd = [os.path.join(a.bin, "fuzz_" + a.name), "-max_total_time=%d" % max(a.seconds, 1), "-timeout=30",
           "-rss_limit_mb=3072", "-print_final_stats=1", "-artifact_prefix=" + artifacts + "/"]
    if a.seconds == 0:
        cmd.append("-runs=0")  # replay the corpus only
    cmd += OPTIONS[a.name] + extra + dirs
    start = time.time()
    log_path = os.path.join(d, "log.txt")
    with open(log_path, "w") as log:
        rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env).returncode
    elapsed = time.time() - start
    log = open(log_path, errors="replace").read()

    def last(pattern, default=0):
        m = re.findall(pattern, log)
        return int(m[-1]) if m else default

    found = sorted(set(os.listdir(artifacts)) - before)
    res = {"name": a.name, "seconds": round(elapsed), "execs": last(r"stat::number_of_executed_units:\s*(\d+)"),
           "cov": last(r"\bcov: (\d+)"), "ft": last(r"\bft: (\d+)"), "corpus": last(r"\bcorp: (\d+)"),
           "rc": rc, "findings": [os.path.join(artifacts, f) for f in found]}
    if rc != 0 and not found:
        res["findings"] = ["(exit status %d without an artifact: see %s)" % (rc, log_path)]
    print("fuzz %s: %d execs in %d s (%d/s), cov %d ft %d, corpus %d; %s" % (
        a.name, res["execs"], res["seconds"], res["execs"] // max(res["seconds"], 1), res["cov"], res["ft"],
        res["corpus"], "findings: " + " ".join(res["findings"]) if res["findings"] else "no findings"))
    if rc != 0:
        # The report: from the sanitizer's or libFuzzer's first line to the end.
        i = max(log.rfind("==ERROR"), log.rfind("runtime error"), log.rfind("ALARM"), log.rfind("==WARNING"))
        print(log[max(0, i - 2000):][-6000:] if i >= 0 else log[-6000:])
        print("log: " + log_path)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f)
    return 0 if rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
