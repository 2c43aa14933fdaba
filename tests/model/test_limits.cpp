// The named limits (model/limits.h) and the bad input the parser and loader refuse
// (docs/reliability.md, "Limits and bad input"): reserved bytes, stray tensors, non-finite norm
// weights and scales, unprintable names, a directory of 100,000 tensors checked without quadratic
// work, and the default context cap.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/half.h"
#include "model/format.h"
#include "model/limits.h"
#include "model/model.h"
#include "model/mlb_patch.h"
#include "model/model_fixture.h"

namespace {

using namespace mlb_patch;

const bytes& valid() {
  static const bytes b = ml_fixture_model(ml_fixture_tmp("limits_valid.mlb"));
  return b;
}

std::string expect_fail(const bytes& b, ml_status want, const std::string& needle) {
  ml_error err;
  const ml_status s = load(b, &err);
  INFO("message: " << err.msg);
  CHECK(s == want);
  CHECK_THAT(std::string(err.msg), Catch::Contains(needle));
  return err.msg;
}

// A file of n F32 1 x 1 tensors named t.0 .. t.{n-1}, each in its own 64-byte slot, with a valid
// header: it parses, and the loader then finds no tok_embd.
bytes many_tensors(uint32_t n) {
  const uint64_t dir = 256, data = (dir + 96ull * n + 63) / 64 * 64, size = data + 64ull * n;
  bytes b(size, 0);
  std::memcpy(b.data(), ML_MLB_MAGIC, 8);
  const uint32_t u32[][2] = {{8, 1},   {12, 256}, {20, 64}, {24, 96}, {28, 2},  {32, 4},  {36, 2},
                             {40, 16}, {44, 40},  {48, 16}, {52, 2},  {136, 1}, {140, 2}, {148, n}};
  for (const auto& f : u32) put32(b, f[0], f[1]);
  const float f32[][2] = {{60, 1e-5f}, {64, 10000.0f}, {76, 1.0f}, {80, 1.0f}, {84, 1.0f}, {100, 1.0f}};
  for (const auto& f : f32) std::memcpy(&b[(size_t)f[0]], &f[1], 4);
  put64(b, 152, dir);
  put64(b, 176, size);
  for (uint32_t i = 0; i < n; ++i) {
    const size_t e = dir + 96ull * i;
    std::snprintf(reinterpret_cast<char*>(&b[e]), 48, "t.%u", i);
    put32(b, e + 56, 1);
    put32(b, e + 60, 1);
    put64(b, e + 64, data + 64ull * i);
    put64(b, e + 72, 4);
  }
  return b;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST_CASE("limits: the fixture loads", "[limits]") {
  ml_error err;
  CHECK(load(valid(), &err) == ML_OK);
}

TEST_CASE("limits: header fields beyond the named limits", "[limits]") {
  struct field {
    size_t off;
    uint32_t v;
    const char* needle;
  };
  const field fields[] = {{28, ML_LIMIT_LAYERS + 1, "n_layers 4097 is out of range 1..4096"},
                          {48, ML_LIMIT_MAX_SEQ + 1, "max_seq 16777217 is out of range 1..16777216"},
                          {48, 0xFFFFFFFFu, "max_seq 4294967295"},
                          {44, ML_LIMIT_VOCAB + 1, "vocab_size 16777217 is out of range"},
                          {20, ML_LIMIT_DIM + 32, "dim 65568 is above the limit 65536"},
                          {24, ML_LIMIT_HIDDEN + 32, "hidden_dim 262176 is above the limit"},
                          {148, ML_LIMIT_TENSORS + 1, "n_tensors 1000001 is out of range"}};
  for (const field& f : fields) {
    bytes b = valid();
    put32(b, f.off, f.v);
    expect_fail(b, f.off == 148 ? ML_E_FORMAT : ML_E_SHAPE, f.needle);
  }
}

TEST_CASE("limits: non-zero reserved bytes are refused naming the byte", "[limits]") {
  for (size_t off : {200, 255}) {
    bytes b = valid();
    b[off] = 1;
    expect_fail(b, ML_E_FORMAT, "reserved byte " + std::to_string(off) + " is 0x01");
  }
  // Version 1 ends its fields at 184: the version 2 fields are reserved bytes there.
  for (size_t off : {184, 199}) {
    bytes b = valid();
    put32(b, 8, 1);
    b[off] = 1;
    expect_fail(b, ML_E_FORMAT, "reserved byte " + std::to_string(off) + " is 0x01 (version 1");
  }
  bytes b = valid();
  b[entry(b, "blk.0.attn_q") + 40] = 'x';  // after the name's NUL
  expect_fail(b, ML_E_FORMAT, "tensor blk.0.attn_q: name padding byte 40 is 0x78");
}

TEST_CASE("limits: a tensor nothing uses is refused (a lowered n_layers)", "[limits]") {
  bytes b = valid();
  put32(b, 28, 1);  // n_layers 2 -> 1: blk.1.* would be silently ignored
  expect_fail(b, ML_E_SHAPE, "tensor blk.1.attn_norm is not used by this model (n_layers 1");
}

TEST_CASE("limits: non-finite norm weights and block scales are refused naming the tensor", "[limits]") {
  const float bad[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()};
  for (float v : bad) {
    bytes b = valid();
    std::memcpy(&b[get64(b, entry(b, "blk.0.ffn_norm") + 64) + 4 * 3], &v, 4);
    expect_fail(b, ML_E_FORMAT, "tensor blk.0.ffn_norm: value 3 is");
    b = valid();
    std::memcpy(&b[get64(b, entry(b, "blk.1.attn_v") + 80) + 4 * 5], &v, 4);  // f32 scales
    expect_fail(b, ML_E_FORMAT, "tensor blk.1.attn_v: block scale 5 is not finite");
  }
  ml_fixture_shape s;
  s.scale_type = ML_SCALE_F16;
  bytes b = ml_fixture_model(ml_fixture_tmp("limits_f16.mlb"), s);
  const size_t at = get64(b, entry(b, "output") + 80) + 2 * 7;
  b[at] = 0x00;
  b[at + 1] = 0x7c;  // f16 +inf
  expect_fail(b, ML_E_FORMAT, "tensor output: block scale 7 is not finite");
}

TEST_CASE("limits: unprintable tensor names are escaped in messages", "[limits]") {
  bytes b = valid();
  const size_t e = entry(b, "blk.1.ffn_norm");
  const char raw[] = "\x1b[2J\x01\xff\\n";
  std::memset(&b[e], 0, 48);
  std::memcpy(&b[e], raw, sizeof raw - 1);
  put32(b, e + 48, 9);  // an unknown type: the parser's message names the tensor
  const std::string msg = expect_fail(b, ML_E_FORMAT, "tensor \\x1b[2J\\x01\\xff\\x5cn: unknown type 9");
  for (char c : msg) CHECK((uint8_t)c >= 0x20);
}

TEST_CASE("limits: the tokenizer section's reserved field must be zero", "[limits]") {
  // The fixture has no tokenizer section: add one holding a 3-token tokenizer.bin.
  bytes b = valid();
  bytes tok = {1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0};  // kind 1, reserved 0, max_token_length 1
  for (int i = 0; i < 40; ++i) {
    const uint8_t t[] = {0, 0, 0, 0, 1, 0, 0, 0, (uint8_t)('A' + i)};
    tok.insert(tok.end(), t, t + sizeof t);
  }
  const uint64_t off = b.size();
  b.insert(b.end(), tok.begin(), tok.end());
  put64(b, 160, off);
  put64(b, 168, tok.size());
  put64(b, 176, b.size());
  ml_error err;
  REQUIRE(load(b, &err) == ML_OK);
  b[off + 5] = 2;
  expect_fail(b, ML_E_FORMAT, "tokenizer section: reserved field is 512, not 0");
}

// The directory checks were O(n^2): 100,000 tensors took over 20 s. Sorting makes them
// O(n log n); the bound below is generous on purpose (sanitizers, emulators, a busy machine).
TEST_CASE("limits: 100,000 tensors are checked and looked up without quadratic work", "[limits]") {
  const uint32_t n = 100000;
  bytes b = many_tensors(n);
  auto t0 = std::chrono::steady_clock::now();
  ml_mlb m;
  ml_error err;
  REQUIRE(ml_mlb_parse(&m, b.data(), b.size(), &err) == ML_OK);
  ml_mlb_index idx;
  REQUIRE(ml_mlb_index_build(&m, &idx, &err) == ML_OK);
  for (uint32_t i = 0; i < n; i += 7) {
    char name[48];
    std::snprintf(name, sizeof name, "t.%u", i);
    REQUIRE(ml_mlb_index_find(&idx, &m, name) == i);
  }
  CHECK(ml_mlb_index_find(&idx, &m, "tok_embd") == -1);
  ml_mlb_index_free(&idx);
  expect_fail(b, ML_E_SHAPE, "tensor tok_embd is missing");
  const double dt = seconds_since(t0);
  INFO("parse + lookups + load of 100,000 tensors: " << dt << " s");
  CHECK(dt < 10.0);

  // The same checks still find a duplicate name and an overlap anywhere in the directory.
  bytes d = b;
  std::memcpy(&d[256 + 96ull * (n - 1)], "t.17\0\0\0\0", 8);
  expect_fail(d, ML_E_FORMAT, "tensor t.17: the name appears twice");
  d = b;
  put64(d, 256 + 96ull * (n - 1) + 64, get64(d, 256 + 96ull * 3 + 64));
  expect_fail(d, ML_E_FORMAT, "overlaps tensor");
}

TEST_CASE("limits: the default context is max_seq capped at 4096, an explicit one is not", "[limits]") {
  ml_fixture_shape s;
  s.max_seq = ML_LIMIT_MAX_SEQ;
  const bytes b = ml_fixture_model(ml_fixture_tmp("limits_bigseq.mlb"), s);
  ml_error err;
  for (int ask : {0, 100, 5000}) {
    ml_model m;
    REQUIRE(ml_model_load_memory(&m, b.data(), b.size(), &err) == ML_OK);
    ml_model_options o;
    o.pack = false;
    o.ctx = ask;
    REQUIRE(ml_model_prepare(&m, &o, &err) == ML_OK);
    CHECK(m.ctx == (ask ? ask : ML_DEFAULT_CTX_CAP));
    CHECK(m.cfg.max_seq == (int)ML_LIMIT_MAX_SEQ);
    ml_model_free(&m);
  }
}

TEST_CASE("limits: a request above the machine's RAM fails at once naming what asked", "[limits]") {
  ml_error err;
  CHECK(ml_check_ram(1 << 20, "a small thing", "", &err) == ML_OK);
  if (ml_phys_mem_bytes() == 0) {
    WARN("SKIP: physical memory unknown on this platform");
    return;
  }
  CHECK(ml_check_ram(UINT64_MAX, "the KV cache (--ctx)", ": lower --ctx", &err) == ML_E_NOMEM);
  CHECK_THAT(std::string(err.msg), Catch::Contains("the KV cache (--ctx) needs 18446744073709551615 bytes"));
  CHECK_THAT(std::string(err.msg), Catch::Contains(": lower --ctx"));
}
