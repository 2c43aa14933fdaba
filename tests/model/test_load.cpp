// Loader robustness (spec/testing.txt): patch a copy of a valid model and check that each
// corruption fails with its own status and a message naming the field and value.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "model/model.h"
#include "model/mlb_patch.h"
#include "model/model_fixture.h"
#include "model/session.h"

namespace {

using namespace mlb_patch;

const bytes& valid() {
  static const bytes b = ml_fixture_model(ml_fixture_tmp("valid.mlb"));
  return b;
}

void expect_fail(const bytes& b, ml_status want, const std::string& needle) {
  ml_error err;
  const ml_status s = load(b, &err);
  INFO("message: " << err.msg);
  CHECK(s == want);
  CHECK_THAT(std::string(err.msg), Catch::Contains(needle));
}

}  // namespace

TEST_CASE("load: the fixture model loads and its config matches the header", "[load]") {
  ml_model m;
  ml_error err;
  const bytes& b = valid();
  REQUIRE(ml_model_load_memory(&m, b.data(), b.size(), &err) == ML_OK);
  CHECK(m.cfg.dim == 64);
  CHECK(m.cfg.hidden_dim == 96);
  CHECK(m.cfg.n_layers == 2);
  CHECK(m.cfg.n_heads == 4);
  CHECK(m.cfg.n_kv_heads == 2);
  CHECK(m.cfg.head_dim == 16);
  CHECK(m.cfg.kv_dim == 32);
  CHECK(m.cfg.vocab_size == 40);
  CHECK(!m.cfg.tied);
  CHECK(m.layers[1].w2.rows == 64);
  CHECK(m.layers[1].w2.cols == 96);
  ml_model_free(&m);
}

TEST_CASE("load: a missing file is an I/O error naming the path", "[load]") {
  ml_model m;
  ml_error err;
  CHECK(ml_model_load(&m, "/nonexistent/model.mlb", &err) == ML_E_IO);
  CHECK_THAT(std::string(err.msg), Catch::Contains("/nonexistent/model.mlb"));
}

TEST_CASE("load: truncated and empty files", "[load]") {
  bytes b = valid();
  b.pop_back();
  expect_fail(b, ML_E_FORMAT, "file_size");
  bytes short_file(valid().begin(), valid().begin() + 100);
  expect_fail(short_file, ML_E_FORMAT, "truncated");
  bytes empty;
  ml_model m;
  ml_error err;
  CHECK(ml_model_load_memory(&m, nullptr, 0, &err) == ML_E_FORMAT);
  CHECK_THAT(std::string(err.msg), Catch::Contains("empty"));
}

TEST_CASE("load: bad magic and version", "[load]") {
  bytes b = valid();
  b[0] = 'X';
  expect_fail(b, ML_E_FORMAT, "magic");
  b = valid();
  put32(b, 8, 3);
  expect_fail(b, ML_E_FORMAT, "version 3");
  b = valid();
  put32(b, 8, 0);
  expect_fail(b, ML_E_FORMAT, "version 0");
}

TEST_CASE("load: dim that is not a multiple of 32", "[load]") {
  bytes b = valid();
  put32(b, 20, 48);
  expect_fail(b, ML_E_SHAPE, "dim 48");
}

TEST_CASE("load: bad head counts", "[load]") {
  bytes b = valid();
  put32(b, 36, 3);  // n_kv_heads 3 does not divide 4
  expect_fail(b, ML_E_SHAPE, "n_kv_heads 3");
  b = valid();
  put32(b, 32, 0);
  expect_fail(b, ML_E_SHAPE, "n_heads 0");
  b = valid();
  put32(b, 40, 15);  // odd head_dim
  expect_fail(b, ML_E_SHAPE, "head_dim 15");
}

TEST_CASE("load: unknown wtype and rope_type", "[load]") {
  bytes b = valid();
  put32(b, 52, 7);
  expect_fail(b, ML_E_FORMAT, "wtype 7");
  b = valid();
  put32(b, 68, 5);
  expect_fail(b, ML_E_FORMAT, "rope_type 5");
}

TEST_CASE("load: a Q8 quant of -128", "[load]") {
  bytes b = valid();
  const size_t e = entry(b, "blk.1.ffn_up");
  b[get64(b, e + 64) + 17] = 0x80;
  expect_fail(b, ML_E_FORMAT, "blk.1.ffn_up: Q8 quant -128 at index 17");
  // The scan reads 8 bytes at a time: the first quant, the first of two in one word, the last.
  const uint64_t size = get64(b, e + 72);
  for (const uint64_t at : {(uint64_t)0, (uint64_t)42, size - 1}) {
    b = valid();
    b[get64(b, e + 64) + at] = 0x80;
    if (at == 42) b[get64(b, e + 64) + 45] = 0x80;
    expect_fail(b, ML_E_FORMAT, "blk.1.ffn_up: Q8 quant -128 at index " + std::to_string(at) + " ");
  }
}

TEST_CASE("load: vocab below 3", "[load]") {
  bytes b = valid();
  put32(b, 44, 2);
  expect_fail(b, ML_E_SHAPE, "vocab_size 2");
}

TEST_CASE("load: sizes that overflow", "[load]") {
  bytes b = valid();
  const size_t e = entry(b, "blk.0.attn_q");
  put32(b, e + 56, 0xFFFFFFFFu);
  put32(b, e + 60, 0xFFFFFFE0u);
  expect_fail(b, ML_E_FORMAT, "blk.0.attn_q");

  // A runtime state whose sizes overflow size_t fails with NOMEM before allocating anything.
  ml_model m;
  ml_error err;
  REQUIRE(ml_model_load_memory(&m, valid().data(), valid().size(), &err) == ML_OK);
  m.cfg.max_seq = 1 << 30;
  m.cfg.n_layers = 4096;
  m.cfg.n_kv_heads = 4096;
  m.cfg.kv_dim = 4096 * 4096;
  m.ctx = 1 << 30;
  size_t need = 0;
  ml_session_opts sp;
  sp.ctx = 1 << 30;
  CHECK(ml_session_plan_bytes(&m, &sp, &need, &err) == ML_E_NOMEM);
  CHECK_THAT(std::string(err.msg), Catch::Contains("overflow"));
  ml_model_free(&m);
}

TEST_CASE("load: offsets and sizes past the end of the file", "[load]") {
  bytes b = valid();
  size_t e = entry(b, "blk.0.attn_k");
  put64(b, e + 64, b.size() - 64);
  expect_fail(b, ML_E_FORMAT, "past the end of the file");
  b = valid();
  e = entry(b, "output");
  put64(b, e + 80, (uint64_t)1 << 62);
  expect_fail(b, ML_E_FORMAT, "output: scales at offset");
  b = valid();
  put64(b, 152, b.size());  // directory past the end
  expect_fail(b, ML_E_FORMAT, "directory");
}

TEST_CASE("load: overlapping tensors", "[load]") {
  bytes b = valid();
  const size_t a = entry(b, "blk.0.attn_k"), c = entry(b, "blk.0.attn_v");
  put64(b, c + 64, get64(b, a + 64));
  expect_fail(b, ML_E_FORMAT, "overlaps");
  b = valid();
  put64(b, a + 64, 256);  // on top of the directory
  expect_fail(b, ML_E_FORMAT, "overlaps the header or directory");
}

TEST_CASE("load: wrong tensor shape, type or a missing tensor", "[load]") {
  bytes b = valid();
  size_t e = entry(b, "blk.1.attn_q");
  put32(b, e + 56, 128);  // 64 x 64 -> 128 x 32: same bytes, wrong shape
  put32(b, e + 60, 32);
  expect_fail(b, ML_E_SHAPE, "blk.1.attn_q: shape 128 x 32, expected 64 x 64");

  b = valid();
  e = entry(b, "blk.0.ffn_gate");  // Q8 -> F16 with a consistent size and no scales: not a weight type
  put32(b, e + 48, ML_DT_F16);
  put32(b, e + 52, 0);
  put32(b, e + 60, 32);  // 96 x 64 -> 96 x 32 halves: the same bytes
  put64(b, e + 80, 0);
  put64(b, e + 88, 0);
  expect_fail(b, ML_E_SHAPE, "blk.0.ffn_gate: type 1");

  b = valid();
  e = entry(b, "blk.1.ffn_norm");
  b[e] = 'X';  // renamed: the loader no longer finds it
  expect_fail(b, ML_E_SHAPE, "blk.1.ffn_norm is missing");
}

TEST_CASE("load: a KV cache larger than 4 GB is sized without overflow", "[load]") {
  ml_fixture_shape s;
  s.max_seq = 1u << 24;  // 2 layers x 2^24 positions x 32 values x 4 bytes x (K and V) = 8 GiB
  const bytes b = ml_fixture_model(ml_fixture_tmp("bigctx.mlb"), s);
  ml_model m;
  ml_error err;
  REQUIRE(ml_model_load_memory(&m, b.data(), b.size(), &err) == ML_OK);
  m.ctx = (int)s.max_seq;
  size_t need = 0;
  ml_session_opts sp;
  sp.ctx = (int)s.max_seq;
  const ml_status st = ml_session_plan_bytes(&m, &sp, &need, &err);
  if (sizeof(size_t) == 4) {
    CHECK(st == ML_E_NOMEM);  // 32-bit targets: refuse, never wrap around
  } else {
    REQUIRE(st == ML_OK);
    CHECK(need > (size_t)8 << 30);
  }
  ml_model_free(&m);
}
