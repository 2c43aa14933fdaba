// The GGUF reader and importer (src/convert/gguf*.cpp): GGUF files written by a tiny writer
// (gguf_fixture.h: std::vector bytes, following ggml's docs/gguf.md independently of src/), a table
// of damaged files each refused with its status and a message naming the key or tensor, bit-exact
// copies of Q8_0/Q4_0 blocks checked against the blocks the test wrote, the BPE tokenizer
// synthesized from a GGUF vocabulary, and the real stories260K.gguf against stories260K.bin
// converted with `ml_convert llama2c` (same quants, same encodings). The architectures beyond
// Llama are test_gguf_archs.cpp's.
#include "gguf_fixture.h"  // Catch2, the converter, the .mlb reader, test_util.h

using namespace gguf_test;

TEST_CASE("gguf: a valid file parses: keys, typed getters, tensors by name", "[gguf]") {
  gguf g = base(GGUF_T_Q8_0);
  g.kvs.push_back(kv_raw("x.u64", [] { bytes b; b.u32(10), b.u64(7); return b.b; }()));
  g.kvs.push_back(kv_i32("x.i32", 9));
  g.kvs.push_back(kv_raw("x.big", [] { bytes b; b.u32(10), b.u64(1ull << 40); return b.b; }()));
  g.kvs.push_back(kv_strs("x.strs", {"a", "", "ccc"}));
  const std::vector<uint8_t> file = g.build();
  gguf_file f;
  ml_error err;
  REQUIRE(gguf_parse(&f, file.data(), file.size(), "t.gguf", &err) == ML_OK);
  CHECK(f.n_tensors == g.ts.size());
  uint32_t v = 0;
  CHECK(gguf_get_u32(&f, "x.u64", true, &v, &err) == ML_OK);
  CHECK(v == 7);
  CHECK(gguf_get_u32(&f, "x.i32", true, &v, &err) == ML_OK);
  CHECK(v == 9);
  CHECK(gguf_get_u32(&f, "x.big", true, &v, &err) == ML_E_FORMAT);
  CHECK(contains(err.msg, "x.big"));
  v = 5;
  CHECK(gguf_get_u32(&f, "absent", false, &v, &err) == ML_OK);
  CHECK(v == 5);
  const gguf_kv* a;
  REQUIRE(gguf_get_array(&f, "x.strs", GGUF_V_STRING, true, &a, &err) == ML_OK);
  cv_buf sb;
  REQUIRE(gguf_arr_strings(&f, a, &sb, &err) == ML_OK);
  const gguf_str* s = sb.as<gguf_str>();
  CHECK(std::string(s[2].p, s[2].len) == "ccc");
  CHECK(s[1].len == 0);
  const gguf_tensor* t = gguf_find_tensor(&f, "blk.0.ffn_down.weight");
  REQUIRE(t);
  CHECK(t->ne[0] == kHidden);
  CHECK(t->ne[1] == kDim);
  CHECK(t->type == GGUF_T_Q8_0);
  CHECK(std::memcmp(t->data, g.tensor_named("blk.0.ffn_down.weight")->data.data(), t->size) == 0);
  CHECK(gguf_find_tensor(&f, "nope") == nullptr);
}

TEST_CASE("gguf: damaged or unsupported files are refused naming the key or tensor", "[gguf]") {
  struct bad {
    const char* what;
    std::function<std::vector<uint8_t>()> make;
    ml_status status;
    const char* needle;
  };
  auto with = [](std::function<void(gguf&)> f, uint32_t mt = GGUF_T_F32) {
    return [f, mt] {
      gguf g = base(mt);
      f(g);
      return g.build();
    };
  };
  auto raw = [](std::function<void(std::vector<uint8_t>&)> f) {
    return [f] {
      std::vector<uint8_t> b = base().build();
      f(b);
      return b;
    };
  };
  auto set_u64 = [](std::vector<uint8_t>& b, size_t at, uint64_t v) { std::memcpy(b.data() + at, &v, 8); };
  const std::vector<bad> cases = {
      {"bad magic", raw([](auto& b) { b[0] = 'X'; }), ML_E_FORMAT, "not a GGUF file"},
      {"version 1", with([](gguf& g) { g.version = 1; }), ML_E_FORMAT, "version 1"},
      {"version 4", with([](gguf& g) { g.version = 4; }), ML_E_FORMAT, "version 4"},
      {"empty file", [] { return std::vector<uint8_t>(); }, ML_E_FORMAT, "not a GGUF file"},
      {"truncated header", raw([](auto& b) { b.resize(20); }), ML_E_FORMAT, "key count"},
      {"tensor count beyond the file", raw([&](auto& b) { set_u64(b, 8, 1u << 20); }), ML_E_FORMAT, "tensor count"},
      {"key count beyond the file", raw([&](auto& b) { set_u64(b, 16, 1ull << 40); }), ML_E_FORMAT, "key count"},
      {"key length past the end", raw([&](auto& b) { set_u64(b, 24, 60000); }), ML_E_FORMAT, "key 0"},
      {"key length over the limit", raw([&](auto& b) { set_u64(b, 24, 1ull << 33); }), ML_E_FORMAT, "exceeds 65535"},
      {"string value past the end",
       with([](gguf& g) { g.kvs.push_back(kv_raw("x.s", [] { bytes b; b.u32(8), b.u64(1ull << 50); return b.b; }())); }),
       ML_E_FORMAT, "x.s: string 0"},
      {"array count overflow",
       with([](gguf& g) {
         g.kvs.push_back(kv_raw("x.a", [] { bytes b; b.u32(9), b.u32(4), b.u64(1ull << 62); return b.b; }()));
       }),
       ML_E_FORMAT, "x.a: array count"},
      {"string array count beyond the file",
       with([](gguf& g) {
         g.kvs.push_back(kv_raw("x.a", [] { bytes b; b.u32(9), b.u32(8), b.u64(1ull << 40); return b.b; }()));
       }),
       ML_E_FORMAT, "x.a: array count"},
      {"unknown value type",
       with([](gguf& g) { g.kvs.push_back(kv_raw("x.t", [] { bytes b; b.u32(13), b.u32(0); return b.b; }())); }),
       ML_E_FORMAT, "x.t: unknown value type 13"},
      {"unknown array element type",
       with([](gguf& g) {
         g.kvs.push_back(kv_raw("x.t", [] { bytes b; b.u32(9), b.u32(99), b.u64(1); return b.b; }()));
       }),
       ML_E_FORMAT, "unknown array element type 99"},
      {"array of arrays",
       with([](gguf& g) { g.kvs.push_back(kv_raw("x.t", [] { bytes b; b.u32(9), b.u32(9), b.u64(1); return b.b; }())); }),
       ML_E_FORMAT, "arrays of arrays"},
      {"bool not 0 or 1", with([](gguf& g) { g.kvs.push_back(kv_bool("x.b", 2)); }), ML_E_FORMAT, "bool value 2"},
      {"duplicate key", with([](gguf& g) { g.kvs.push_back(kv_u32("llama.block_count", 1)); }), ML_E_FORMAT,
       "llama.block_count appears twice"},
      {"alignment not a power of two", with([](gguf& g) { g.kvs.push_back(kv_u32("general.alignment", 48)); }),
       ML_E_FORMAT, "general.alignment is 48"},
      {"alignment of the wrong type", with([](gguf& g) { g.kvs.push_back(kv_f32("general.alignment", 32)); }),
       ML_E_FORMAT, "general.alignment has type f32"},
      {"n_dims 5", with([](gguf& g) { g.ts[1].ne = {kDim, 1, 1, 1, 1}; }), ML_E_FORMAT,
       "blk.0.attn_norm.weight: n_dims 5"},
      {"a zero dimension", with([](gguf& g) { g.ts[1].ne = {kDim, 0}; }), ML_E_FORMAT, "attn_norm.weight: dimension 1 is 0"},
      {"dims product overflow", with([](gguf& g) { g.ts[1].ne = {1ull << 32, 1ull << 32, 1ull << 32}; }), ML_E_FORMAT,
       "attn_norm.weight: the element count overflows"},
      {"offset misaligned", with([](gguf& g) { g.ts[2].offset = 8; }), ML_E_FORMAT,
       "attn_q.weight: offset 8 is not a multiple of the alignment 32"},
      {"offset outside the data", with([](gguf& g) { g.ts[2].offset = 1ll << 40; }), ML_E_FORMAT,
       "attn_q.weight: bytes"},
      {"tensor running past the end", raw([](auto& b) { b.resize(b.size() - 4); }), ML_E_FORMAT, "output_norm.weight"},
      {"overlapping tensors", with([](gguf& g) { g.ts[3].offset = 0; }), ML_E_FORMAT, "overlap"},
      {"unknown tensor type", with([](gguf& g) { g.ts[2].type = 99; }), ML_E_FORMAT, "attn_q.weight: unknown tensor type 99"},
      {"row not a whole number of blocks", with([](gguf& g) { g.ts[1].type = GGUF_T_Q8_0; g.ts[1].ne = {16}; }),
       ML_E_FORMAT, "attn_norm.weight: row length 16 is not a multiple of Q8_0"},
      {"duplicate tensor name", with([](gguf& g) { g.ts[3].name = g.ts[2].name; }), ML_E_FORMAT,
       "blk.0.attn_q.weight appears twice"},
      {"tensor name too long", with([](gguf& g) { g.ts[3].name = std::string(64, 'a'); }), ML_E_FORMAT, "exceeds 63"},
      {"missing required key", with([](gguf& g) { g.erase_kv("llama.embedding_length"); }), ML_E_FORMAT,
       "llama.embedding_length is missing"},
      {"key of the wrong type", with([](gguf& g) { *g.find("llama.block_count") = kv_str("llama.block_count", "1"); }),
       ML_E_FORMAT, "llama.block_count has type string, not an integer"},
      {"negative count", with([](gguf& g) { *g.find("llama.block_count") = kv_i32("llama.block_count", -1); }),
       ML_E_FORMAT, "llama.block_count is -1"},
      {"architecture missing", with([](gguf& g) { g.erase_kv("general.architecture"); }), ML_E_FORMAT,
       "general.architecture is missing"},
      {"unknown architecture",
       with([](gguf& g) { *g.find("general.architecture") = kv_str("general.architecture", "mamba"); }), ML_E_FORMAT,
       "architecture \"mamba\" is not supported"},
      {"qwen35moe refused",
       with([](gguf& g) { *g.find("general.architecture") = kv_str("general.architecture", "qwen35moe"); }), ML_E_FORMAT,
       "\"qwen35moe\" is not supported"},
      {"a Q8_0 quant of -128",
       with([](gguf& g) { g.tensor_named("blk.0.attn_q.weight")->data[2 + 5] = 0x80; }, GGUF_T_Q8_0), ML_E_FORMAT,
       "blk.0.attn_q: quant 5 of row 0 is -128"},
      {"a NaN Q8_0 scale",
       with([](gguf& g) { auto& d = g.tensor_named("blk.0.attn_k.weight")->data; d[0] = 0x00, d[1] = 0x7E; },
            GGUF_T_Q8_0),
       ML_E_FORMAT, "blk.0.attn_k: the scale of block 0"},
      {"shape mismatch with the header", with([](gguf& g) { g.tensor_named("blk.0.attn_q.weight")->ne = {kDim, 16}; }),
       ML_E_SHAPE, "blk.0.attn_q.weight: shape [32, 16"},
      {"missing tensor", with([](gguf& g) { g.erase_tensor("blk.0.ffn_up.weight"); }), ML_E_FORMAT,
       "blk.0.ffn_up.weight is missing"},
      {"tensor of a layer beyond block_count",
       with([](gguf& g) { g.ts.push_back({"blk.1.attn_norm.weight", {kDim}, GGUF_T_F32, std::vector<uint8_t>(128)}); }),
       ML_E_FORMAT, "blk.1.attn_norm.weight is not part of"},
      {"quantized norm", with([](gguf& g) {
         auto* t = g.tensor_named("output_norm.weight");
         t->type = GGUF_T_Q8_0, t->data.assign(34, 0);
       }),
       ML_E_FORMAT, "output_norm.weight: type Q8_0, not F32"},
      {"unsupported quant type",
       with([](gguf& g) {
         auto* t = g.tensor_named("blk.0.attn_v.weight");
         t->type = GGUF_T_Q8_1, t->data.assign(32 * 36, 0);
       }),
       ML_E_FORMAT, "blk.0.attn_v.weight: type Q8_1 is not supported"},
      {"yarn scaling", with([](gguf& g) { g.kvs.push_back(kv_str("llama.rope.scaling.type", "yarn")); }), ML_E_FORMAT,
       "rope.scaling.type \"yarn\""},
      {"dim not a multiple of 32 outside llama",
       with([](gguf& g) {
         *g.find("general.architecture") = kv_str("general.architecture", "qwen3");
         for (auto& k : g.kvs)
           if (k.key.rfind("llama.", 0) == 0) k.key = "qwen3." + k.key.substr(6);
         *g.find("qwen3.embedding_length") = kv_u32("qwen3.embedding_length", 40);
       }),
       ML_E_SHAPE, "embedding_length 40"},
      {"unknown tokenizer model", with([](gguf& g) { g.kvs.push_back(kv_str("tokenizer.ggml.model", "bert")); }),
       ML_E_FORMAT, "tokenizer.ggml.model: \"bert\""},
      {"tokenizer without tokens", with([](gguf& g) { g.kvs.push_back(kv_str("tokenizer.ggml.model", "llama")); }),
       ML_E_FORMAT, "tokenizer.ggml.tokens is missing"},
      {"SPM vocabulary smaller than the embedding",
       with([](gguf& g) {
         g.kvs.push_back(kv_str("tokenizer.ggml.model", "llama"));
         g.kvs.push_back(kv_strs("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>"}));
       }),
       ML_E_SHAPE, "has 3 tokens, not the model's 8"},
      {"unknown BPE pre-tokenizer",
       with([](gguf& g) {
         g.kvs.push_back(kv_str("tokenizer.ggml.model", "gpt2"));
         g.kvs.push_back(kv_str("tokenizer.ggml.pre", "deepseek-coder"));
         g.kvs.push_back(kv_strs("tokenizer.ggml.tokens", {"a", "b"}));
       }),
       ML_E_FORMAT, "pre-tokenizer \"deepseek-coder\""},
      {"scores array of the wrong type",
       with([](gguf& g) {
         g.kvs.push_back(kv_str("tokenizer.ggml.model", "llama"));
         g.kvs.push_back(kv_strs("tokenizer.ggml.tokens", {"a", "b", "c", "d", "e", "f", "g", "h"}));
         g.kvs.push_back(kv_i32s("tokenizer.ggml.scores", {0, 0, 0, 0, 0, 0, 0, 0}));
       }),
       ML_E_FORMAT, "tokenizer.ggml.scores has type array of i32"},
  };
  ml_test_dir d;
  for (const bad& c : cases) {
    INFO(c.what);
    const result r = convert(d, c.make());
    CHECK(r.s == c.status);
    INFO(r.msg);
    CHECK(contains(r.msg, c.needle));
  }
  CHECK(cases.size() >= 25);
}

TEST_CASE("gguf: a FIFO is refused without blocking, naming it", "[gguf]") {
  ml_test_dir d;
  const std::string fifo = d / "pipe.gguf", out = d / "out.mlb";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  cv_gguf_opts o = cv_gguf_defaults();
  o.path = fifo.c_str();
  o.out = out.c_str();
  ml_error err;
  CHECK(cv_gguf(&o, &err) == ML_E_ARG);
  CHECK(contains(err.msg, "pipe.gguf"));
  CHECK(!fs::exists(out));
}

TEST_CASE("gguf: Q8_0 and Q4_0 tensors are copied bit for bit", "[gguf]") {
  for (uint32_t mt : {GGUF_T_Q8_0, GGUF_T_Q4_0}) {
    INFO("type " << mt);
    ml_test_dir d;
    gguf g = base(mt, 7 + mt);
    const result r = convert(d, g.build());
    REQUIRE(r.s == ML_OK);
    CHECK(r.warn.empty());
    mlb_file f(d / "out.mlb");
    CHECK(f.m.h.wtype == (mt == GGUF_T_Q8_0 ? (uint32_t)ML_DT_Q8 : (uint32_t)ML_DT_Q4));
    CHECK(f.m.h.scale_type == ML_SCALE_F16);
    CHECK((f.m.h.flags & ML_FLAG_TIED_CLASSIFIER) != 0);
    for (const char* n : kMatrices) {
      INFO(n);
      std::vector<uint8_t> q, s;
      split_blocks(g.tensor_named(std::string(n) + ".weight")->data, mt == GGUF_T_Q8_0 ? 34 : 18, &q, &s);
      const ml_mlb_tensor t = f.get(mlb_name(n).c_str());
      CHECK(f.data(t) == q);
      CHECK(f.scales(t) == s);
    }
    // And the engine loads it.
    ml_model m;
    ml_error err;
    CHECK(ml_model_load(&m, (d / "out.mlb").c_str(), &err) == ML_OK);
    ml_model_free(&m);
  }
}

TEST_CASE("gguf: a file converted at load (cv_gguf_opts::mem), by path or by bytes, holds the bytes cv_gguf writes", "[gguf]") {
  ml_test_dir d;
  const std::vector<uint8_t> file = base(GGUF_T_Q8_0).build();
  REQUIRE(convert(d, file).s == ML_OK);
  const std::vector<uint8_t> want = ml_test_read(d / "out.mlb");
  const std::string in = d / "in.gguf";
  for (bool by_bytes : {false, true}) {
    INFO("by bytes: " << by_bytes);
    cv_gguf_opts o = cv_gguf_defaults();
    o.path = in.c_str();
    if (by_bytes) o.data = file.data(), o.size = file.size();
    cv_mem_out out = converted_out();
    o.mem = &out;
    ml_error err;
    REQUIRE(cv_gguf(&o, &err) == ML_OK);
    CHECK(converted_bytes(&out) == want);
  }
}

TEST_CASE("gguf: Q4_0 into a Q8 model widens exactly, Q8_0 into Q4 and K-free F16 quantize", "[gguf]") {
  ml_test_dir d;
  gguf g = base(GGUF_T_Q4_0, 3);
  REQUIRE(convert(d, g.build(), ML_DT_Q8).s == ML_OK);
  {
    mlb_file f(d / "out.mlb");
    CHECK(f.m.h.wtype == (uint32_t)ML_DT_Q8);
    const auto& src = g.tensor_named("blk.0.attn_q.weight")->data;
    const ml_mlb_tensor t = f.get("blk.0.attn_q");
    const std::vector<uint8_t> q = f.data(t), s = f.scales(t);
    for (size_t b = 0; b < src.size() / 18; ++b) {
      CHECK(s[2 * b] == src[18 * b]);
      CHECK(s[2 * b + 1] == src[18 * b + 1]);
      for (int j = 0; j < 16; ++j) {
        CHECK((int8_t)q[32 * b + j] == (src[18 * b + 2 + j] & 15) - 8);
        CHECK((int8_t)q[32 * b + j + 16] == (src[18 * b + 2 + j] >> 4) - 8);
      }
    }
  }
  // Q8_0 into a Q4 model is decoded and requantized, with a warning naming the tensors.
  const result r = convert(d, base(GGUF_T_Q8_0).build(), ML_DT_Q4);
  REQUIRE(r.s == ML_OK);
  CHECK(contains(r.warn, "token_embd.weight (Q8_0)"));
  CHECK(contains(r.warn, "requantized to Q4"));
  // F16 matrices are quantized without a warning, and the model loads.
  const result h = convert(d, base(GGUF_T_F16).build());
  REQUIRE(h.s == ML_OK);
  CHECK(h.warn.empty());
  ml_model m;
  ml_error err;
  CHECK(ml_model_load(&m, (d / "out.mlb").c_str(), &err) == ML_OK);
  ml_model_free(&m);
}

TEST_CASE("gguf: a byte-level BPE vocabulary becomes a tokenizer.json with merges and special tokens", "[gguf]") {
  ml_test_dir d;
  gguf g = base();
  // Byte-level pieces: "Ġ" is the space.
  const std::vector<std::string> toks = {"H", "e", "l", "o", "\xC4\xA0", "ll", "He", "<|end|>"};
  g.kvs.push_back(kv_str("tokenizer.ggml.model", "gpt2"));
  g.kvs.push_back(kv_str("tokenizer.ggml.pre", "gpt2"));
  g.kvs.push_back(kv_strs("tokenizer.ggml.tokens", toks));
  g.kvs.push_back(kv_i32s("tokenizer.ggml.token_type", {1, 1, 1, 1, 1, 1, 1, 3}));
  g.kvs.push_back(kv_strs("tokenizer.ggml.merges", {"l l", "H e"}));
  g.kvs.push_back(kv_u32("tokenizer.ggml.eos_token_id", 7));
  g.kvs.push_back(kv_str("tokenizer.chat_template", "{% for m in messages %}{{ m.content }}<|end|>{% endfor %}"));
  const result r = convert(d, g.build());
  REQUIRE(r.s == ML_OK);
  ml_model m;
  load_converted(d, &m);
  ml_error err;
  REQUIRE(m.tok);
  CHECK(ml_tokenizer_kind(m.tok) == ML_TOK_HF);
  int32_t ids[16];
  size_t n = 0;
  REQUIRE(ml_tokenizer_encode(m.tok, "Hello Hello<|end|>", 18, false, ids, 16, &n, &err) == ML_OK);
  // The oracle: the merges by hand. "He" "ll" "o", then " " as Ġ, "He" "ll" "o", then the special token.
  const std::vector<int32_t> want = {6, 5, 3, 4, 6, 5, 3, 7};
  CHECK(std::vector<int32_t>(ids, ids + n) == want);
  CHECK(ml_tokenizer_is_special(m.tok, 7));
  CHECK(ml_tokenizer_eos(m.tok) == 7);
  CHECK(m.mlb.h.eos_id == 7);
  ml_model_free(&m);
}

TEST_CASE("gguf: stories260K.gguf gives stories260K.bin's model and tok512.bin's encodings", "[gguf][real]") {
  const std::string gpath = ml_test_shared("models/stories260K-gguf/stories260K.gguf");
  if (!fs::exists(gpath)) {
    WARN("skipped: no " << gpath);
    return;
  }
  ml_test_dir d;
  const std::string gout = d / "g.mlb", lout = d / "l.mlb";
  cv_gguf_opts o = cv_gguf_defaults();
  o.path = gpath.c_str();
  o.out = gout.c_str();
  ml_error err;
  REQUIRE(cv_gguf(&o, &err) == ML_OK);
  cv_llama2c_opts lo = cv_llama2c_defaults();
  const std::string ck = ml_test_shared("models/stories260K.bin"), tk = ml_test_shared("models/tok512.bin");
  lo.checkpoint = ck.c_str();
  lo.tokenizer = tk.c_str();
  lo.out = lout.c_str();
  lo.scale_type = ML_SCALE_F16;
  REQUIRE(cv_llama2c(&lo, &err) == ML_OK);
  mlb_file g(gout), l(lout);
  CHECK(g.m.h.dim == l.m.h.dim);
  CHECK(g.m.h.hidden_dim == l.m.h.hidden_dim);
  CHECK(g.m.h.n_kv_heads == l.m.h.n_kv_heads);
  CHECK(g.m.h.rope_type == (uint32_t)ML_ROPE_INTERLEAVED);
  CHECK(g.m.h.norm_eps == l.m.h.norm_eps);
  // Every tensor of the llama2.c conversion has the same bytes (the GGUF's output equals its embedding).
  for (uint32_t i = 0; i < l.m.n_tensors; ++i) {
    const ml_mlb_tensor lt = ml_mlb_tensor_at(&l.m, i);
    INFO(lt.name);
    const ml_mlb_tensor gt = g.get(lt.name);
    CHECK(g.data(gt) == l.data(lt));
    if (lt.scale_size) CHECK(g.scales(gt) == l.scales(lt));
  }
  // The converted SentencePiece vocabulary encodes as tok512.bin does.
  ml_model gm, lm;
  REQUIRE(ml_model_load(&gm, gout.c_str(), &err) == ML_OK);
  REQUIRE(ml_model_load(&lm, lout.c_str(), &err) == ML_OK);
  ml_model_options mo;
  mo.pack = false;
  REQUIRE(ml_model_prepare(&gm, &mo, &err) == ML_OK);
  REQUIRE(ml_model_prepare(&lm, &mo, &err) == ML_OK);
  for (const char* text : {"Once upon a time", "Lily's cat said: \"Hello!\"\n", "  two  spaces", "\xC3\xA9t\xC3\xA9 \xE2\x82\xAC 42",
                           "<s></s><unk>", ""}) {
    INFO(text);
    int32_t a[256], b[256];
    size_t na = 0, nb = 0;
    REQUIRE(ml_tokenizer_encode(gm.tok, text, std::strlen(text), true, a, 256, &na, &err) == ML_OK);
    REQUIRE(ml_tokenizer_encode(lm.tok, text, std::strlen(text), true, b, 256, &nb, &err) == ML_OK);
    CHECK(std::vector<int32_t>(a, a + na) == std::vector<int32_t>(b, b + nb));
  }
  ml_model_free(&gm);
  // With a chat template the vocabulary becomes a tokenizer.json (merges derived from the scores,
  // byte fallback): it too encodes as tok512.bin does, and decodes back to the text.
  const std::string tmpl = d / "t.jinja", hout = d / "h.mlb";
  {
    std::ofstream(tmpl) << "{% for m in messages %}{{ m.content }}{% endfor %}";
  }
  o.chat_template = tmpl.c_str();
  o.out = hout.c_str();
  REQUIRE(cv_gguf(&o, &err) == ML_OK);
  ml_model hm;
  REQUIRE(ml_model_load(&hm, hout.c_str(), &err) == ML_OK);
  REQUIRE(ml_model_prepare(&hm, &mo, &err) == ML_OK);
  CHECK(ml_tokenizer_kind(hm.tok) == ML_TOK_HF);
  for (const char* text : {"Once upon a time", "Lily's cat said: \"Hello!\"\n", "  two  spaces", "\xC3\xA9t\xC3\xA9 \xE2\x82\xAC 42",
                           "The little dog was very happy. He ran and ran and played with his friends all day long."}) {
    INFO(text);
    int32_t a[256], b[256];
    size_t na = 0, nb = 0;
    REQUIRE(ml_tokenizer_encode(hm.tok, text, std::strlen(text), true, a, 256, &na, &err) == ML_OK);
    REQUIRE(ml_tokenizer_encode(lm.tok, text, std::strlen(text), true, b, 256, &nb, &err) == ML_OK);
    CHECK(std::vector<int32_t>(a, a + na) == std::vector<int32_t>(b, b + nb));
    ml_vec<char> back;
    REQUIRE(ml_tokenizer_decode(hm.tok, a, na, true, &back, &err) == ML_OK);
    CHECK(std::string(back.data(), back.size()) == text);
  }
  ml_model_free(&hm);
  ml_model_free(&lm);
}

// The K-quant decoders against blocks encoded here from ggml's published layouts (the inverse
// direction: the test places each chosen 4/6-bit value and 6-bit/int8 scale where the layout says).
TEST_CASE("gguf: Q4_K and Q6_K blocks decode to the values they encode", "[gguf]") {
  {
    // Q4_K: f16 d, f16 dmin, 12 bytes of eight 6-bit scales and mins, 128 bytes of nibbles; element
    // l of 64-value chunk c is sub-block 2c (low nibble of byte 32c + l) or 2c + 1 (l >= 32, high).
    std::vector<uint8_t> b(144, 0);
    const float d = 0.25f, dmin = 0.5f;
    const uint16_t hd = ml_float_to_half(d), hm = ml_float_to_half(dmin);
    b[0] = (uint8_t)hd, b[1] = (uint8_t)(hd >> 8), b[2] = (uint8_t)hm, b[3] = (uint8_t)(hm >> 8);
    int sc[8], mn[8];
    uint8_t* s = b.data() + 4;
    for (int j = 0; j < 8; ++j) {
      sc[j] = 10 + 7 * j, mn[j] = 63 - 5 * j;
      if (j < 4) {
        s[j] |= (uint8_t)sc[j], s[j + 4] |= (uint8_t)mn[j];
      } else {
        s[j + 4] = (uint8_t)((sc[j] & 15) | (mn[j] & 15) << 4);
        s[j - 4] |= (uint8_t)((sc[j] >> 4) << 6);
        s[j] |= (uint8_t)((mn[j] >> 4) << 6);
      }
    }
    std::vector<float> want(256);
    for (int i = 0; i < 256; ++i) {
      const int q = (i * 7 + 3) % 16, c = i / 64, l = i % 64, j = i / 32;
      uint8_t& byte = b[16 + 32 * c + l % 32];
      byte |= (uint8_t)(l < 32 ? q : q << 4);
      want[i] = d * sc[j] * q - dmin * mn[j];
    }
    std::vector<float> got(256);
    REQUIRE(cv_gguf_dequant(GGUF_T_Q4_K, b.data(), 256, got.data()));
    for (int i = 0; i < 256; ++i) {
      INFO("Q4_K element " << i);
      CHECK(got[i] == Approx(want[i]).margin(1e-5));
    }
  }
  {
    // Q6_K: ql[128], qh[64], int8 scales[16], f16 d. Element i: half n = i/128, quarter g = (i%128)/32,
    // l = i%32; low 4 bits in ql[64n + l + 32(g&1)] (low nibble for g < 2), high 2 bits in
    // qh[32n + l] at bit 2g, scale sc[8n + l/16 + 2g]; value d * sc * (q - 32).
    std::vector<uint8_t> b(210, 0);
    const float d = 0.125f;
    const uint16_t hd = ml_float_to_half(d);
    b[208] = (uint8_t)hd, b[209] = (uint8_t)(hd >> 8);
    int8_t sc[16];
    for (int k = 0; k < 16; ++k) sc[k] = (int8_t)(k * 9 - 70), b[192 + k] = (uint8_t)sc[k];
    std::vector<float> want(256);
    for (int i = 0; i < 256; ++i) {
      const int q = (i * 13 + 5) % 64, n = i / 128, g = (i % 128) / 32, l = i % 32;
      uint8_t& lo = b[64 * n + l + 32 * (g & 1)];
      lo |= (uint8_t)(g < 2 ? (q & 15) : (q & 15) << 4);
      b[128 + 32 * n + l] |= (uint8_t)((q >> 4) << (2 * g));
      want[i] = d * sc[8 * n + l / 16 + 2 * g] * (q - 32);
    }
    std::vector<float> got(256);
    REQUIRE(cv_gguf_dequant(GGUF_T_Q6_K, b.data(), 256, got.data()));
    for (int i = 0; i < 256; ++i) {
      INFO("Q6_K element " << i);
      CHECK(got[i] == Approx(want[i]).margin(1e-5));
    }
  }
}
