// The converter library (src/convert/convert.h) called directly, as ml_convert and the wasm module
// call it: a random model loads with the engine's loader and has the requested shape; bad llama2.c
// inputs fail with ML_E_FORMAT naming the file; allocations that cannot succeed fail with
// ML_E_NOMEM naming the tensor, decided from the sizes before any memory is asked for. The real
// inputs are ../shared/models/stories260K.bin and tok512.bin. (That the archive holds no exception
// machinery is the CTest convert.no_exceptions, tests/convert/check_no_exceptions.cmake.)
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <limits>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "convert/convert.h"
#include "model/limits.h"
#include "model/model.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;

bool contains(const char* msg, const std::string& needle) { return std::strstr(msg, needle.c_str()) != nullptr; }

cv_random_opts small_shape(const std::string& out) {
  cv_random_opts o = cv_random_defaults();
  o.dim = 64, o.hidden = 96, o.layers = 2, o.heads = 4, o.kv_heads = 2, o.vocab = 512, o.max_seq = 32;
  o.out = out.c_str();
  return o;
}

}  // namespace

TEST_CASE("convert: the option defaults are ml_convert's", "[convert]") {
  const cv_llama2c_opts l = cv_llama2c_defaults();
  CHECK(l.checkpoint == nullptr);
  CHECK(l.tokenizer == nullptr);
  CHECK(l.out == nullptr);
  CHECK(l.wtype == ML_DT_Q8);
  CHECK(l.scale_type == ML_SCALE_F32);
  const cv_random_opts r = cv_random_defaults();
  CHECK(r.seed == 1);
  CHECK(r.head_dim == 0);
  CHECK(r.wtype == ML_DT_Q8);
  CHECK(r.scale_type == ML_SCALE_F32);
  CHECK(r.tied == 0);
  CHECK(r.rope_type == ML_ROPE_INTERLEAVED);
  CHECK(r.rope_theta == 10000.0f);
  CHECK(r.tokenizer == nullptr);
  CHECK(r.out == nullptr);
}

TEST_CASE("convert: a random model loads with the requested shape", "[convert]") {
  ml_test_dir d;
  const std::string out = d / "r.mlb", tok = ml_test_shared("models/tok512.bin");
  cv_random_opts o = small_shape(out);
  bool tied = false, with_tok = false;
  SECTION("q8, f32 scales, separate classifier, no tokenizer") {}
  SECTION("q4, f16 scales, tied, head_dim 48, half RoPE, tok512 embedded") {
    o.wtype = ML_DT_Q4, o.scale_type = ML_SCALE_F16, o.tied = 1, o.head_dim = 48, o.rope_type = ML_ROPE_HALF;
    o.rope_theta = 500000.0f, o.seed = 7, o.tokenizer = tok.c_str();
    tied = with_tok = true;
  }
  ml_error err;
  REQUIRE(cv_random(&o, &err) == ML_OK);

  ml_model m;
  ml_error lerr;
  const ml_status s = ml_model_load(&m, out.c_str(), &lerr);
  INFO(lerr.msg);
  REQUIRE(s == ML_OK);
  const ml_config& c = m.cfg;
  const int hd = o.head_dim ? (int)o.head_dim : (int)(o.dim / o.heads);
  CHECK(c.dim == o.dim);
  CHECK(c.hidden_dim == o.hidden);
  CHECK(c.n_layers == o.layers);
  CHECK(c.n_heads == o.heads);
  CHECK(c.n_kv_heads == o.kv_heads);
  CHECK(c.head_dim == hd);
  CHECK(c.q_dim == o.heads * hd);
  CHECK(c.kv_dim == o.kv_heads * hd);
  CHECK(c.vocab_size == o.vocab);
  CHECK(c.max_seq == o.max_seq);
  CHECK(m.mlb.h.wtype == o.wtype);
  CHECK(m.layers[0].wq.type == (int)o.wtype);
  CHECK(m.rope.type == (int)o.rope_type);
  CHECK(m.rope.theta == (double)o.rope_theta);
  CHECK(c.tied == tied);
  CHECK(m.mlb.h.scale_type == o.scale_type);
  CHECK((m.mlb.tokenizer != nullptr) == with_tok);
  if (with_tok) CHECK(m.mlb.tokenizer_size == ml_test_read<std::vector<char>>(tok).size());
  ml_model_free(&m);
}

TEST_CASE("convert: a truncated llama2.c checkpoint is ML_E_FORMAT naming the file", "[convert]") {
  ml_test_dir d;
  const std::vector<char> ckpt = ml_test_read<std::vector<char>>(ml_test_shared("models/stories260K.bin"));
  const std::string cut = d / "cut.bin", out = d / "out.mlb", tok = ml_test_shared("models/tok512.bin");
  size_t keep = 0;
  SECTION("inside the weights") { keep = ckpt.size() - 100; }
  SECTION("inside the header") { keep = 20; }
  ml_test_write(cut, ckpt.data(), keep);
  cv_llama2c_opts o = cv_llama2c_defaults();
  o.checkpoint = cut.c_str(), o.tokenizer = tok.c_str(), o.out = out.c_str();
  ml_error err;
  CHECK(cv_llama2c(&o, &err) == ML_E_FORMAT);
  INFO(err.msg);
  CHECK(err.status == ML_E_FORMAT);
  CHECK(contains(err.msg, cut));
  CHECK(contains(err.msg, std::to_string(keep) + " bytes"));
  CHECK_FALSE(fs::exists(out));
}

TEST_CASE("convert: a bad tokenizer is ML_E_FORMAT naming the file", "[convert]") {
  ml_test_dir d;
  const std::vector<char> tok = ml_test_read<std::vector<char>>(ml_test_shared("models/tok512.bin"));
  const std::string bad = d / "bad_tok.bin", out = d / "out.mlb", ckpt = ml_test_shared("models/stories260K.bin");
  std::string needle;
  SECTION("truncated between tokens") {
    ml_test_write(bad, tok.data(), tok.size() / 2);  // tok512.bin's middle falls between tokens 221 and 222
    needle = "token 222: score truncated";
  }
  SECTION("truncated inside the last token") {
    ml_test_write(bad, tok.data(), tok.size() - 1);
    needle = "token 511: bytes truncated";
  }
  SECTION("max_token_length 0") {
    std::vector<char> z = tok;
    std::memset(z.data(), 0, 4);
    ml_test_write(bad, z.data(), z.size());
    needle = "max_token_length 0 is out of range";
  }
  SECTION("trailing bytes") {
    std::vector<char> z = tok;
    z.push_back(0);
    ml_test_write(bad, z.data(), z.size());
    needle = "1 bytes follow token 511";
  }
  SECTION("a NaN score (the loader refuses it, so the converter must)") {
    std::vector<char> z = tok;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::memcpy(z.data() + 4 + 8 + 5, &nan, 4);  // token 1's score (token 0 is "<unk>": 5 bytes)
    ml_test_write(bad, z.data(), z.size());
    needle = "score is NaN";
  }
  SECTION("max_token_length above the limit") {
    std::vector<char> z = tok;
    const int32_t big = (int32_t)ML_LIMIT_TOKEN_BYTES + 1;
    std::memcpy(z.data(), &big, 4);
    ml_test_write(bad, z.data(), z.size());
    needle = "max_token_length 1048577 is out of range";
  }
  for (const bool llama2c : {true, false}) {
    ml_error err;
    if (llama2c) {
      cv_llama2c_opts o = cv_llama2c_defaults();
      o.checkpoint = ckpt.c_str(), o.tokenizer = bad.c_str(), o.out = out.c_str();
      CHECK(cv_llama2c(&o, &err) == ML_E_FORMAT);
    } else {
      cv_random_opts o = small_shape(out);
      o.tokenizer = bad.c_str();
      CHECK(cv_random(&o, &err) == ML_E_FORMAT);
    }
    INFO((llama2c ? "llama2c: " : "random: ") << err.msg);
    CHECK(contains(err.msg, bad + ": tokenizer: "));
    CHECK(contains(err.msg, needle));
    CHECK_FALSE(fs::exists(out));
  }
}

TEST_CASE("convert: null paths are ML_E_ARG naming the option", "[convert]") {
  ml_error err;
  cv_llama2c_opts l = cv_llama2c_defaults();
  l.checkpoint = "a.bin", l.out = "b.mlb";
  CHECK(cv_llama2c(&l, &err) == ML_E_ARG);
  CHECK(contains(err.msg, "--tokenizer"));
  cv_random_opts r = small_shape("x");
  r.out = nullptr;
  CHECK(cv_random(&r, &err) == ML_E_ARG);
  CHECK(contains(err.msg, "--output"));
}

// A shape inside the engine's limits whose first tensor (tok_embd, vocab x dim floats: 4 TiB)
// cannot be allocated: more than this machine's RAM, or (32-bit, wasm) more than the address
// space. Decided from the sizes alone (cv_alloc), so the test asks for no memory and runs at
// once; the old std::vector-based converter died on std::length_error here.
TEST_CASE("convert: a random shape too large to allocate is ML_E_NOMEM naming the tensor", "[convert]") {
  ml_test_dir d;
  const std::string out = d / "huge.mlb";
  cv_random_opts o = small_shape(out);
  o.heads = 1, o.kv_heads = 1, o.head_dim = 64;
  o.dim = ML_LIMIT_DIM;
  o.vocab = ML_LIMIT_VOCAB;
  ml_error err;
  CHECK(cv_random(&o, &err) == ML_E_NOMEM);
  INFO(err.msg);
  CHECK(err.status == ML_E_NOMEM);
  CHECK(contains(err.msg, "tensor tok_embd"));
  CHECK_FALSE(fs::exists(out));
}

// The converter refuses what the loader refuses (model/limits.h), naming the option, before any
// work: these shapes were once written (n_layers 5000, max_seq 2^32-1) or died allocating.
TEST_CASE("convert: shapes beyond the engine's limits are ML_E_ARG naming the option", "[convert][limits]") {
  ml_test_dir d;
  const std::string out = d / "big.mlb";
  cv_random_opts o = small_shape(out);
  std::string needle;
  SECTION("--layers") { o.layers = ML_LIMIT_LAYERS + 1; needle = "--layers 4097"; }
  SECTION("--max-seq") { o.max_seq = 4294967295ll; needle = "--max-seq 4294967295"; }
  SECTION("--vocab") { o.vocab = 4294967295ll; needle = "--vocab"; }
  SECTION("--dim") { o.dim = 4294967264ll; needle = "--dim"; }
  SECTION("--head-dim") { o.head_dim = ML_LIMIT_HEAD_DIM + 2; needle = "--head-dim"; }
  ml_error err;
  CHECK(cv_random(&o, &err) == ML_E_ARG);
  INFO(err.msg);
  CHECK(contains(err.msg, needle));
  CHECK_FALSE(fs::exists(out));
}

TEST_CASE("convert: cv_alloc zero-fills, and fails on overflow without allocating", "[convert]") {
  ml_error err;
  cv_buf b;
  REQUIRE(cv_alloc(&b, 100, sizeof(float), &err, "tensor %s", "x") == ML_OK);
  REQUIRE(b.data != nullptr);
  CHECK(b.size == 400);
  for (size_t i = 0; i < b.size; ++i) REQUIRE(b.data[i] == 0);
  cv_buf moved = static_cast<cv_buf&&>(b);
  CHECK(b.data == nullptr);
  CHECK(moved.size == 400);

  CHECK(cv_alloc(&moved, SIZE_MAX / 2 + 1, 2, &err, "tensor %s's quants", "blk.0.attn_q") == ML_E_NOMEM);
  CHECK(contains(err.msg, "tensor blk.0.attn_q's quants: "));
  CHECK(contains(err.msg, "overflow"));
  CHECK(moved.data == nullptr);
  CHECK(moved.size == 0);

  CHECK(cv_alloc(&moved, (size_t)PTRDIFF_MAX / 4 + 1, 4, &err, "%s", "big") == ML_E_NOMEM);
  CHECK(contains(err.msg, "big: "));
  CHECK(contains(err.msg, "exceed"));

  REQUIRE(cv_alloc(&moved, 0, 4, &err, "empty") == ML_OK);
  CHECK(moved.data != nullptr);
  CHECK(moved.size == 0);
}
