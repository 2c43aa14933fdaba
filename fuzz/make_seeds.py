#!/usr/bin/env python3
"""Writes the committed seed corpora of fuzz/corpus/ (small by design: tiny models and files, a few
hundred KB in all). Seeds too large to commit (stories260K converted, the 32000-token tokenizer)
are made at run time by run.py. Run again after a format change:

  fuzz/make_seeds.py --convert build/scalar/bin/ml_convert [--shared ../shared]

Deterministic: ml_convert random is seeded, and the rest is fixed bytes."""
import argparse
import os
import shutil
import struct
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def tokenizer(pieces, max_len=None):
    """A llama2.c tokenizer.bin: i32 max_token_length, then per token f32 score, i32 len, bytes."""
    max_len = max_len if max_len is not None else max(len(p) for p in pieces)
    out = struct.pack("<i", max_len)
    for i, p in enumerate(pieces):
        out += struct.pack("<fi", -float(i), len(p)) + p
    return out


def tiny_vocab(n):
    base = [b"<unk>", b"<s>", b"</s>", b" ", b"a", b"b", b" a", b"ab"]
    return (base + [b"t%d" % i for i in range(len(base), n)])[:n]


def checkpoint(dim, hidden, layers, heads, kv_heads, vocab, seq, version=0, shared=True):
    """A llama2.c float32 checkpoint, legacy (version 0: 7 i32, negative vocab = untied) or version 1
    ("ak42", 256-byte header), with small deterministic weights."""
    head = dim // heads
    kv_dim = head * kv_heads
    n = vocab * dim + layers * (dim + dim * dim + 2 * dim * kv_dim + dim * dim + dim + 3 * dim * hidden) + dim
    if version == 0:
        n += seq * head  # freq_cis_real + freq_cis_imag, half a head each
    if not shared:
        n += vocab * dim
    w = struct.pack("<%df" % n, *[((i * 37) % 17 - 8) / 64.0 for i in range(n)])
    if version == 0:
        h = struct.pack("<7i", dim, hidden, layers, heads, kv_heads, vocab if shared else -vocab, seq)
    else:
        h = struct.pack("<Ii7iB", 0x616B3432, 1, dim, hidden, layers, heads, kv_heads, vocab, seq, 1 if shared else 0)
        h += b"\0" * (256 - len(h))
    return h + w


def json_seeds():
    """Small JSON documents for fuzz/json.cpp: a tokenizer.json skeleton, escapes, numbers at the edges."""
    return [
        ("tokenizer", b'{"version":"1.0","added_tokens":[{"id":0,"content":"<unk>","special":true}],'
                      b'"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2,"\u0120t":3},"merges":["a b",["a","b"]]}}'),
        ("escapes", rb'["\\\"\/\b\f\n\r\t","\u00e9\u20AC\ud83d\ude00",' + b'"caf\xc3\xa9 \xf0\x9f\x98\x80",' +
                    rb'"a\u0000b"]'),
        ("numbers", b'[0,-0,-0.0,1e400,-1e-400,9223372036854775807,-9223372036854775808,9223372036854775808,0.1,1E+2]'),
        ("nested", b'[[[[{"a":[{"b":{}}]}]]]]'),
        ("duplicates", b'{"k":1,"k":2,"":null,"\u0000":true}'),
    ]


def pack_cache_seeds():
    """Inputs of fuzz/pack_cache.cpp: byte 0 flags (1 raw, 2 rehash the body, 4 resize), then edits
    (u32 offset, u8 n, n bytes) of the valid cache (512-byte header + body; about 26 KB here)."""
    def edit(at, data):
        return struct.pack("<IB", at, len(data)) + data
    body = edit(4096, b"\xff\x00\x7f\x80") + edit(20000, b"\xff" * 16) + edit(26000, b"\x00\x7e\x00\x7c\xff\xff")
    return [
        ("valid", b"\x00"),
        ("body_edit", b"\x00" + body),                    # the body hash no longer matches: repacked
        ("body_edit_rehash", b"\x02" + body),             # the hash fixed: mapped, the kernels read the edits
        ("header_g", b"\x00" + edit(16, b"\x05")),         # pack parameters
        ("header_identity", b"\x00" + edit(64, b"\x01")),  # the model's inode
        ("header_layout", b"\x02" + edit(88, b"\x01")),    # the model layout hash
        ("header_size", b"\x02" + edit(96, b"\x00")),      # body size
        ("header_reserved", b"\x02" + edit(300, b"\x01")),
        ("short", b"\x04" + struct.pack("<I", 26111)),
        ("long_rehash", b"\x06" + struct.pack("<I", 26112 + 64)),
        ("empty", b"\x04" + struct.pack("<I", 0)),
        ("raw_magic", b"\x01KRAFLPK1"),
    ]


def safetensors_file(tensors, meta=None):
    """A .safetensors file: u64 header length, the JSON header (padded with spaces to 8 bytes), the data."""
    import json
    header, data = {}, b""
    if meta is not None:
        header["__metadata__"] = meta
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def safetensors_seeds():
    """Tiny files for fuzz/safetensors.cpp: every dtype, ranks 0..3, an empty tensor, metadata."""
    f32 = struct.pack("<6f", 1.0, -2.5, 0.0, 3.25, -0.0, 1e-40)
    bf16 = struct.pack("<4H", 0x3F80, 0xBFC0, 0x7F80, 0x0001)
    f16 = struct.pack("<4H", 0x3C00, 0xC100, 0x7C00, 0x0001)
    return [
        ("llama_layer", safetensors_file([
            ("model.layers.0.input_layernorm.weight", "F32", [2], f32[:8]),
            ("model.layers.0.self_attn.q_proj.weight", "BF16", [2, 2], bf16),
            ("lm_head.weight", "F16", [2, 2], f16)],
            {"format": "pt", "model.embed_tokens.weight": "lm_head.weight"})),
        ("ranks", safetensors_file([("scalar", "F32", [], f32[:4]), ("conv1d", "F32", [2, 1, 3], f32),
                                    ("empty", "BF16", [0, 4], b"")])),
        ("no_tensors", safetensors_file([], {"format": "pt"})),
        ("empty_header", safetensors_file([])),
    ]


def hf_config_seeds():
    """Small config.json texts for fuzz/hf_config.cpp, one per architecture (a NUL, then a
    generation_config.json, where given); run.py adds the real ones from shared/."""
    import json
    base = {"hidden_size": 64, "intermediate_size": 72, "num_hidden_layers": 2, "num_attention_heads": 4,
            "num_key_value_heads": 2, "vocab_size": 300, "max_position_embeddings": 64}
    def cfg(**kw):
        c = dict(base)
        c.update(kw)
        return json.dumps(c).encode()
    return [
        ("llama3", cfg(architectures=["LlamaForCausalLM"], rope_scaling={
            "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 32}, eos_token_id=[2, 3]) + b"\0" + b'{"eos_token_id":[2,9]}'),
        ("mistral", cfg(model_type="mistral", sliding_window=16, rope_scaling={"type": "linear", "factor": 2})),
        ("qwen2", cfg(architectures=["Qwen2ForCausalLM"], use_sliding_window=False, tie_word_embeddings=True)),
        ("qwen3", cfg(model_type="qwen3", head_dim=32, rope_parameters={"rope_type": "default", "rope_theta": 1e6})),
        ("gemma3", cfg(model_type="gemma3_text", head_dim=32, layer_types=["sliding_attention", "full_attention"],
                       query_pre_attn_scalar=24, final_logit_softcapping=30.0, rope_local_base_freq=1e4)),
        ("qwen3_5", json.dumps({"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5",
                                "text_config": dict(base, head_dim=32, full_attention_interval=2,
                                                    linear_num_key_heads=2, linear_num_value_heads=4,
                                                    linear_key_head_dim=16, linear_value_head_dim=16,
                                                    partial_rotary_factor=0.25)}).encode()),
    ]


def server_api_seeds():
    """Request bodies for fuzz/server_api.cpp: chat and completion requests using every field,
    tokenize and detokenize bodies (run.py adds JSONTestSuite's files)."""
    import json
    msgs = [{"role": "developer", "content": "be brief"}, {"role": "system", "content": "s"},
            {"role": "user", "content": [{"type": "text", "text": "caf\u00e9"}, {"type": "text", "text": "\U0001F600"}]},
            {"role": "assistant", "content": None}, {"role": "user", "content": "again", "name": "ann"}]
    full = {"model": "m", "messages": msgs, "max_tokens": 8, "max_completion_tokens": 9, "temperature": 0.5,
            "top_p": 0.9, "top_k": 40, "min_p": 0.05, "seed": -1, "stop": ["\n\n", "END"], "stream": True,
            "stream_options": {"include_usage": True}, "logprobs": True, "top_logprobs": 3, "n": 1,
            "presence_penalty": 0.5, "frequency_penalty": -0.5, "response_format": {"type": "text"}, "tools": [],
            "tool_choice": "none", "chat_template_kwargs": {"enable_thinking": False}, "user": "u", "unknown": [1]}
    dump = lambda o: json.dumps(o, ensure_ascii=False).encode()
    return [
        ("chat_min", dump({"messages": [{"role": "user", "content": "hi"}]})),
        ("chat_full", dump(full)),
        ("chat_refused", dump({"messages": [{"role": "tool", "content": "x"}], "n": 2,
                               "response_format": {"type": "json_schema"}, "tools": [{"type": "function"}]})),
        ("chat_numbers", b'{"messages":[{"role":"user","content":"x"}],"max_tokens":1e999,"temperature":-0,'
                         b'"seed":18446744073709551615,"top_k":2147483648}'),
        ("completion_text", dump({"prompt": "Once upon a time", "max_tokens": 16, "logprobs": 5, "echo": False,
                                  "suffix": "", "best_of": 1, "stream": True})),
        ("completion_ids", dump({"prompt": [[1, 2, 3]], "stop": "\n"})),
        ("completion_batch", dump({"prompt": ["a", "b"]})),
        ("tokenize", dump({"content": "Hello world", "add_special": False, "with_pieces": True})),
        ("detokenize", dump({"tokens": [1, 2, 3, 2147483647]})),
        ("invalid_utf8", b'{"messages":[{"role":"user","content":"caf\xc3"}]}'),
    ]


def http_request_seeds():
    """Connections for fuzz/http_request.cpp: a mode byte (bit 0: the stream has the bytes buffered;
    else reads of 1 + (byte >> 1) % 7 bytes), then what a client sends, requests back to back."""
    body = b'{"messages":[{"role":"user","content":"Hi"}],"max_tokens":2}'
    auth = b"Authorization: Bearer sk-fuzz\r\n"
    post = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + auth + b"Content-Type: application/json\r\n"
    conns = [
        ("health", b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("pipelined", b"GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/models HTTP/1.1\r\nHost: x\r\n" + auth +
         b"\r\nGET /metrics HTTP/1.1\r\n" + auth + b"\r\n"),
        ("chat", post + b"Content-Length: %d\r\n\r\n" % len(body) + body),
        ("chunked", post + b"Transfer-Encoding: chunked\r\n\r\n%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n"),
        ("expect", post + b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(body) + body),
        ("too_large", post + b"Content-Length: 99999\r\n\r\n" + b"x" * 64),
        ("cl_and_te", post + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /health HTTP/1.1\r\n\r\n"),
        ("no_key", b"POST /v1/completions HTTP/1.1\r\nContent-Length: 15\r\n\r\n{\"prompt\":\"a\"}GET /health HTTP/1.1\r\n\r\n"),
        ("options", b"OPTIONS /v1/chat/completions HTTP/1.1\r\nOrigin: https://example.org\r\n\r\n"),
        ("head_405", b"HEAD /v1/models HTTP/1.1\r\n\r\nPUT /health HTTP/1.1\r\nContent-Length: 1\r\n\r\nx"),
        ("tokenize", b"POST /tokenize HTTP/1.1\r\n" + auth + b"Content-Length: 17\r\n\r\n{\"content\":\"hi\"}"),
        ("bare_lf_http10", b"GET /health HTTP/1.0\nHost: x\n\n"),
        ("no_colon", b"GET /health HTTP/1.1\r\nHost x\r\n\r\n"),
    ]
    for name, data in conns:
        for mode in (1, 0, 6):
            yield "%s_%d" % (name, mode), bytes([mode]) + data


def put(name, fname, data):
    d = os.path.join(HERE, "corpus", name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, fname), "wb") as f:
        f.write(data)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--convert", required=True, help="an ml_convert executable")
    ap.add_argument("--shared", default=os.environ.get("KRAFLA_SHARED", os.path.join(HERE, "..", "..", "shared")))
    a = ap.parse_args()
    tmp = tempfile.mkdtemp()
    try:
        tok8 = os.path.join(tmp, "tok8.bin")
        open(tok8, "wb").write(tokenizer(tiny_vocab(8)))
        # mlb_load / mlb_header: tiny random models (Q8 and Q4, f16 scales, tied, half RoPE, GQA,
        # with and without a tokenizer section).
        variants = {
            "q8": [],
            "q4_f16": ["--wtype", "q4", "--scales", "f16"],
            "tied_half": ["--tied", "--rope-type", "half"],
            "gqa_tok": ["--heads", "2", "--kv-heads", "1", "--tokenizer", tok8],
        }
        for tag, extra in variants.items():
            args = {"--dim": "32", "--hidden": "64", "--layers": "1", "--heads": "1", "--kv-heads": "1", "--vocab": "8",
                    "--max-seq": "8"}
            for k in ("--heads", "--kv-heads"):
                if k in extra:
                    args[k] = extra[extra.index(k) + 1]
            extra = [x for i, x in enumerate(extra) if not (x in ("--heads", "--kv-heads") or
                                                          (i and extra[i - 1] in ("--heads", "--kv-heads")))]
            out = os.path.join(tmp, tag + ".mlb")
            cmd = [a.convert, "random", "-o", out] + [x for kv in args.items() for x in kv] + extra
            subprocess.run(cmd, check=True)
            data = open(out, "rb").read()
            put("mlb_load", tag + ".mlb", data)
            put("mlb_header", tag + ".mlb", data[:1024] if len(data) > 1024 else data)
        # tokenizer_bin: tok512.bin (6 KB) and a few tiny vocabularies.
        t512 = os.path.join(a.shared, "models", "tok512.bin")
        if os.path.exists(t512):
            put("tokenizer_bin", "tok512.bin", open(t512, "rb").read())
        put("tokenizer_bin", "tiny8.bin", tokenizer(tiny_vocab(8)))
        put("tokenizer_bin", "bytes.bin", tokenizer([b"<unk>", b"<s>", b"</s>"] + [b"<0x%02X>" % i for i in range(256)] +
                                                    [b" ", b"ab", b"\xc3\xa9"]))
        put("tokenizer_bin", "empty_tokens.bin", tokenizer([b"", b"", b"x"], max_len=0))
        # llama2c: byte 0 mode, u32 checkpoint length, checkpoint, tokenizer (run.py adds stories260K).
        tok = tokenizer(tiny_vocab(8))
        for tag, ck, mode in (("legacy", checkpoint(32, 64, 1, 2, 2, 8, 4), 0),
                              ("legacy_untied_q4", checkpoint(32, 64, 1, 2, 1, 8, 4, shared=False), 1),
                              ("v1_f16", checkpoint(32, 64, 2, 2, 2, 8, 4, version=1), 2)):
            put("llama2c", tag, bytes([mode]) + struct.pack("<I", len(ck)) + ck + tok)
        # tok_text: texts.
        for i, t in enumerate([b"", b"Once upon a time, there was a little girl named Lily.", b"  leading and  double",
                               "caf\u00e9 \u20ac \U0001F600 \u4e2d\u6587".encode(), b"\xff\xfe\x80\xc3 broken",
                               b"tab\tnew\nline\r\0nul", b"<s></s><unk>", b"<0x41>" + b"x" * 300]):
            put("tok_text", "text%d" % i, t)
        # json: small documents (run.py adds JSONTestSuite's files and a tokenizer.json from shared/).
        for name, doc in json_seeds():
            put("json", name, doc)
        # hf_config: one small config.json per architecture.
        for name, data in hf_config_seeds():
            put("hf_config", name, data)
        # http_request: connections (requests back to back).
        for name, data in http_request_seeds():
            put("http_request", name, data)
        # server_api: request bodies.
        for name, data in server_api_seeds():
            put("server_api", name, data)
        # safetensors: tiny files of every dtype and rank.
        for name, data in safetensors_seeds():
            put("safetensors", name, data)
        # pack_cache: edits of the valid cache the harness makes at start-up (fuzz/pack_cache.cpp).
        for name, edit in pack_cache_seeds():
            put("pack_cache", name, edit)
        # The command lines (one argument per line), against the fixtures cli.cpp writes.
        cli = {
            "cli_run": [["m.mlb", "-p", "Once upon a time", "-n", "8", "--temp", "0"],
                        ["m.mlb", "--tokens", "1 2 3", "-n", "2", "--seed", "7", "--top-k", "5", "--top-p", "0.5"],
                        ["r.mlb", "--tokens", "1,2", "--dump-logits", "out.bin"],
                        ["m.mlb", "-p", "hi", "-n", "4", "-t", "2", "--batch", "3", "--kv", "q8", "--ctx", "16",
                         "--pack-cache", "--profile"],
                        ["m.mlb", "-z", "tok.bin", "-p", "x", "-n", "1", "--no-pack", "--kv", "f16"], ["--help"], [],
                        ["m.mlb", "-p", "Once", "-n", "6", "--temp", "0.8", "--min-p", "0.1", "--presence-penalty", "1",
                         "--frequency-penalty", "-0.5"]],
            "cli_tok": [["tok.bin", "encode", "Once upon a time", "--bos"], ["m.mlb", "decode", "1 2 3 400"],
                        ["tok.bin", "encode", "--vocab", "512", "caf\u00e9"], ["r.mlb", "encode", "x"], ["--help"]],
            "cli_convert": [["llama2c", "ck.bin", "--tokenizer", "tok.bin", "-o", "o.mlb", "--wtype", "q4"],
                            ["random", "--dim", "32", "--hidden", "32", "--layers", "1", "--heads", "1", "--kv-heads", "1",
                             "--vocab", "8", "--max-seq", "8", "-o", "o.mlb", "--seed", "3", "--tied", "--rope-type",
                             "half", "--scales", "f16"],
                            ["random", "--dim", "64", "--hidden", "96", "--layers", "2", "--heads", "4", "--kv-heads", "2",
                             "--head-dim", "8", "--vocab", "512", "--max-seq", "16", "--tokenizer", "tok.bin", "-o", "o.mlb"],
                            ["--help"], ["random", "--help"]],
            "cli_bench": [["--model", "m.mlb", "--prefill", "4", "-n", "4", "--runs", "1"],
                          ["--model", "r.mlb", "--prefill", "2", "-n", "2", "--runs", "1", "--sessions", "2", "-t", "2",
                           "--batch", "2", "--pack-cache"], ["--model", "m.mlb", "--no-pack", "--runs", "1", "-n", "1",
                                                             "--prefill", "1"], ["--help"]],
            "cli_perplexity": [["m.mlb", "tok.bin", "--ctx", "32", "--json"],
                               ["m.mlb", "ck.bin", "--ctx", "16", "-t", "2", "--batch", "5", "--kv", "q8"],
                               ["r.mlb", "tok.bin", "--ids", "--ctx", "4"], ["m.mlb", "-", "--ctx", "3"],
                               ["m.mlb", "m.mlb", "--ctx", "64", "--kv", "f16", "--no-pack", "--pack-cache"], ["--help"]],
        }
        for name, lines in cli.items():
            for i, argv in enumerate(lines):
                put(name, "args%d" % i, "\n".join(argv).encode())
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
