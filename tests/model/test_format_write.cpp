// ml_mlb_write against docs/format.md, read back by hand: every header field at its documented
// offset, the directory entries, 64-byte alignment of every array, zero gaps, the tokenizer
// section and file_size. The reads here use their own little-endian helpers, not the parser.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "model/format.h"
#include "model/format_write.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;

uint32_t rd32(const std::vector<uint8_t>& b, size_t o) {
  REQUIRE(o + 4 <= b.size());
  return (uint32_t)b[o] | (uint32_t)b[o + 1] << 8 | (uint32_t)b[o + 2] << 16 | (uint32_t)b[o + 3] << 24;
}
uint64_t rd64(const std::vector<uint8_t>& b, size_t o) { return rd32(b, o) | (uint64_t)rd32(b, o + 4) << 32; }
float rdf(const std::vector<uint8_t>& b, size_t o) {
  const uint32_t u = rd32(b, o);
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = (uint8_t)(seed + i * 7 + (i >> 8));
  return v;
}

ml_mlb_tensor_src make(const char* name, uint32_t type, uint32_t st, uint32_t rows, uint32_t cols,
                       const std::vector<uint8_t>& data, const std::vector<uint8_t>* scales) {
  ml_mlb_tensor_src s;
  REQUIRE(std::strlen(name) < sizeof s.t.name);
  std::memcpy(s.t.name, name, std::strlen(name) + 1);
  s.t.type = type;
  s.t.scale_type = st;
  s.t.rows = rows;
  s.t.cols = cols;
  s.data = data.data();
  s.scales = scales ? scales->data() : nullptr;
  return s;
}

// A header with a distinct value in every field, so a field written at the wrong offset shows.
ml_mlb_header distinct_header(uint32_t scale_type) {
  ml_mlb_header h;
  h.arch = 0;
  h.dim = 64;
  h.hidden_dim = 96;
  h.n_layers = 3;
  h.n_heads = 4;
  h.n_kv_heads = 2;
  h.head_dim = 16;
  h.vocab_size = 35;
  h.max_seq = 77;
  h.wtype = ML_DT_Q4;
  h.scale_type = scale_type;
  h.norm_eps = 1e-6f;
  h.rope_theta = 500000.0f;
  h.rope_type = 1;
  h.rope_scaling = 2;
  h.rope_factor = 8.0f;
  h.rope_low_freq_factor = 1.5f;
  h.rope_high_freq_factor = 4.5f;
  h.rope_orig_max_seq = 8192;
  h.flags = 8;
  h.activation = 1;
  h.embed_scale = 2.5f;
  h.sliding_window = 512;
  h.sliding_pattern = 6;
  h.linear_period = 4;
  h.linear_k_heads = 5;
  h.linear_v_heads = 7;
  h.linear_k_dim = 11;
  h.linear_v_dim = 13;
  h.linear_conv = 17;
  h.bos_id = 19;
  h.eos_id = 23;
  h.hidden_dim_orig = 90;
  h.rope_local_theta = 10000.0f;
  h.n_rot = 8;
  h.attn_scale = 0.0625f;
  h.logit_softcap = 30.0f;
  h.n_tensors = 999;                  // computed by the writer
  h.dir_offset = 12345;               // computed
  h.tokenizer_offset = h.file_size = 1;  // computed
  return h;
}

}  // namespace

TEST_CASE("ml_mlb_write lays out header, directory, arrays and tokenizer as docs/format.md says", "[format]") {
  ml_test_dir dir;
  const uint32_t st = GENERATE(ML_SCALE_F32, ML_SCALE_F16);
  const uint32_t sbytes = st == ML_SCALE_F32 ? 4 : 2;
  const ml_mlb_header h = distinct_header(st);

  // F32 1x64, Q8 3x64, Q4 5x96, F16 2x7, Q8 1x32: odd sizes so the padding matters.
  const auto norm = pattern(64 * 4, 1);
  const auto q8 = pattern(3 * 64, 2), q8s = pattern(3 * 2 * sbytes, 3);
  const auto q4 = pattern(5 * 96 / 2, 4), q4s = pattern(5 * 3 * sbytes, 5);
  const auto f16 = pattern(2 * 7 * 2, 6);
  const auto q8b = pattern(32, 7), q8bs = pattern(sbytes, 8);
  std::vector<ml_mlb_tensor_src> t = {
      make("output_norm", ML_DT_F32, 0, 1, 64, norm, nullptr),
      make("blk.0.attn_q", ML_DT_Q8, st, 3, 64, q8, &q8s),
      make("blk.10.ffn_down_with_a_name_of_47_bytes_xxxxxxx", ML_DT_Q4, st, 5, 96, q4, &q4s),
      make("f16", ML_DT_F16, 0, 2, 7, f16, nullptr),
      make("last", ML_DT_Q8, st, 1, 32, q8b, &q8bs),
  };
  REQUIRE(std::strlen(t[2].t.name) == 47);
  const std::vector<const std::vector<uint8_t>*> datas = {&norm, &q8, &q4, &f16, &q8b};
  const std::vector<const std::vector<uint8_t>*> scales = {nullptr, &q8s, &q4s, nullptr, &q8bs};
  const auto tok = pattern(123, 9);

  const fs::path path = dir.p / "m.mlb";
  ml_error err;
  REQUIRE(ml_mlb_write(path.c_str(), &h, t.data(), t.size(), tok.data(), tok.size(), &err) == ML_OK);
  CHECK(dir.count() == 1);  // no temporary file left behind
  const auto b = ml_test_read(path);
  REQUIRE(b.size() >= 256);

  // Header.
  CHECK(std::memcmp(b.data(), "KRAFLMLB", 8) == 0);
  const struct {
    size_t off;
    uint32_t v;
  } u32s[] = {{8, 2},    {12, 256},  {16, 0},   {20, 64},  {24, 96},  {28, 3},   {32, 4},   {36, 2},
              {40, 16},  {44, 35},   {48, 77},  {52, 3},   {56, st},  {68, 1},   {72, 2},   {88, 8192},
              {92, 8},   {96, 1},    {104, 512}, {108, 6}, {112, 4},  {116, 5},  {120, 7},  {124, 11},
              {128, 13}, {132, 17},  {136, 19}, {140, 23}, {144, 90}, {148, 5}};
  for (const auto& f : u32s) {
    INFO("header offset " << f.off);
    CHECK(rd32(b, f.off) == f.v);
  }
  CHECK(rdf(b, 60) == 1e-6f);
  CHECK(rdf(b, 64) == 500000.0f);
  CHECK(rdf(b, 76) == 8.0f);
  CHECK(rdf(b, 80) == 1.5f);
  CHECK(rdf(b, 84) == 4.5f);
  CHECK(rdf(b, 100) == 2.5f);
  CHECK(rd64(b, 152) == 256);  // dir_offset
  CHECK(rdf(b, 184) == 10000.0f);
  CHECK(rd32(b, 188) == 8);
  CHECK(rdf(b, 192) == 0.0625f);
  CHECK(rdf(b, 196) == 30.0f);
  for (size_t i = 200; i < 256; ++i) CHECK(b[i] == 0);

  // Directory and arrays.
  uint64_t end = 256 + 5 * 96;  // nothing may start before the end of the directory
  for (size_t i = 0; i < t.size(); ++i) {
    INFO("tensor " << i);
    const size_t e = 256 + i * 96;
    const std::string name(reinterpret_cast<const char*>(&b[e]), strnlen(reinterpret_cast<const char*>(&b[e]), 48));
    CHECK(name == t[i].t.name);
    for (size_t k = e + name.size(); k < e + 48; ++k) CHECK(b[k] == 0);
    CHECK(rd32(b, e + 48) == t[i].t.type);
    const bool quant = t[i].t.type == ML_DT_Q8 || t[i].t.type == ML_DT_Q4;
    CHECK(rd32(b, e + 52) == (quant ? st : 0u));
    CHECK(rd32(b, e + 56) == t[i].t.rows);
    CHECK(rd32(b, e + 60) == t[i].t.cols);
    const uint64_t n = (uint64_t)t[i].t.rows * t[i].t.cols;
    const uint64_t want_data = t[i].t.type == ML_DT_F32 ? n * 4 : t[i].t.type == ML_DT_F16 ? n * 2
                               : t[i].t.type == ML_DT_Q8 ? n : n / 2;
    const uint64_t want_scales = quant ? n / 32 * sbytes : 0;
    const uint64_t doff = rd64(b, e + 64), dsize = rd64(b, e + 72), soff = rd64(b, e + 80), ssize = rd64(b, e + 88);
    CHECK(dsize == want_data);
    CHECK(ssize == want_scales);
    CHECK(doff % 64 == 0);
    CHECK(doff >= end);
    // The smallest aligned position: arrays follow each other in order, the gap is zeros.
    CHECK(doff == (end + 63) / 64 * 64);
    for (uint64_t k = end; k < doff; ++k) CHECK(b[k] == 0);
    REQUIRE(doff + dsize <= b.size());
    CHECK(std::memcmp(&b[doff], datas[i]->data(), dsize) == 0);
    end = doff + dsize;
    if (quant) {
      CHECK(soff % 64 == 0);
      CHECK(soff == (end + 63) / 64 * 64);
      for (uint64_t k = end; k < soff; ++k) CHECK(b[k] == 0);
      REQUIRE(soff + ssize <= b.size());
      CHECK(std::memcmp(&b[soff], scales[i]->data(), ssize) == 0);
      end = soff + ssize;
    } else {
      CHECK(soff == 0);
    }
  }

  // Tokenizer section, last.
  const uint64_t tok_off = rd64(b, 160), tok_size = rd64(b, 168);
  CHECK(tok_off >= end);
  CHECK(tok_off % 8 == 0);
  CHECK(tok_size == 8 + tok.size());
  REQUIRE(tok_off + tok_size <= b.size());
  CHECK(rd32(b, tok_off) == 1);
  CHECK(rd32(b, tok_off + 4) == 0);
  CHECK(std::memcmp(&b[tok_off + 8], tok.data(), tok.size()) == 0);
  CHECK(rd64(b, 176) == b.size());
  CHECK(tok_off + tok_size == b.size());
}

TEST_CASE("ml_mlb_write without a tokenizer ends at the last array", "[format]") {
  ml_test_dir dir;
  ml_mlb_header h = distinct_header(ML_SCALE_F32);
  const auto q = pattern(2 * 64, 1), s = pattern(2 * 2 * 4, 2);
  const ml_mlb_tensor_src t = make("w", ML_DT_Q8, ML_SCALE_F32, 2, 64, q, &s);
  const fs::path path = dir.p / "m.mlb";
  ml_error err;
  REQUIRE(ml_mlb_write(path.c_str(), &h, &t, 1, nullptr, 0, &err) == ML_OK);
  const auto b = ml_test_read(path);
  CHECK(rd32(b, 148) == 1);
  CHECK(rd64(b, 160) == 0);
  CHECK(rd64(b, 168) == 0);
  // header 256 + one entry 96 = 352 -> data at 384 (128 bytes) -> scales at 512 (16 bytes).
  CHECK(rd64(b, 256 + 64) == 384);
  CHECK(rd64(b, 256 + 80) == 512);
  CHECK(rd64(b, 176) == 528);
  CHECK(b.size() == 528);
}

TEST_CASE("ml_mlb_write replaces an existing file only when it succeeds", "[format]") {
  ml_test_dir dir;
  const ml_mlb_header h = distinct_header(ML_SCALE_F32);
  const fs::path path = dir.p / "m.mlb";
  const auto q = pattern(64, 1), s = pattern(8, 2);
  ml_error err;

  SECTION("a tensor the format cannot hold fails with ML_E_ARG and leaves the old file") {
    { std::ofstream(path) << "old"; }
    ml_mlb_tensor_src bad = make("w", ML_DT_Q8, ML_SCALE_F32, 2, 33, q, &s);  // cols not a multiple of 32
    CHECK(ml_mlb_write(path.c_str(), &h, &bad, 1, nullptr, 0, &err) == ML_E_ARG);
    CHECK(std::string(err.msg).find("cols 33") != std::string::npos);
    bad = make("w", ML_DT_Q8, ML_SCALE_F16, 1, 64, q, &s);  // scale type differs from the header's
    CHECK(ml_mlb_write(path.c_str(), &h, &bad, 1, nullptr, 0, &err) == ML_E_ARG);
    bad = make("w", ML_DT_Q8, ML_SCALE_F32, 1, 64, q, &s);
    std::memset(bad.t.name, 'x', sizeof bad.t.name);  // 48 name bytes, no NUL
    CHECK(ml_mlb_write(path.c_str(), &h, &bad, 1, nullptr, 0, &err) == ML_E_ARG);
    bad = make("w", 7, ML_SCALE_F32, 1, 64, q, &s);
    CHECK(ml_mlb_write(path.c_str(), &h, &bad, 1, nullptr, 0, &err) == ML_E_ARG);
    CHECK(ml_test_read(path) == std::vector<uint8_t>{'o', 'l', 'd'});
    CHECK(dir.count() == 1);
  }
  SECTION("a second write replaces the first") {
    const ml_mlb_tensor_src a = make("a", ML_DT_Q8, ML_SCALE_F32, 1, 64, q, &s);
    const ml_mlb_tensor_src two[2] = {a, make("b", ML_DT_Q8, ML_SCALE_F32, 1, 64, q, &s)};
    REQUIRE(ml_mlb_write(path.c_str(), &h, two, 2, nullptr, 0, &err) == ML_OK);
    REQUIRE(ml_mlb_write(path.c_str(), &h, &a, 1, nullptr, 0, &err) == ML_OK);
    const auto b = ml_test_read(path);
    CHECK(rd32(b, 148) == 1);
    CHECK(rd64(b, 176) == b.size());
    CHECK(dir.count() == 1);
  }
  SECTION("an unwritable path fails with ML_E_IO naming the path and the OS error") {
    const fs::path missing = dir.p / "no_such_dir" / "m.mlb";
    const ml_mlb_tensor_src a = make("a", ML_DT_Q8, ML_SCALE_F32, 1, 64, q, &s);
    CHECK(ml_mlb_write(missing.c_str(), &h, &a, 1, nullptr, 0, &err) == ML_E_IO);
    const std::string msg = err.msg;
    CHECK(msg.find(missing.string()) != std::string::npos);
    CHECK(msg.find("No such file or directory") != std::string::npos);
  }
  SECTION("a directory as the target is refused before anything is written") {
    fs::create_directories(path / "occupied");
    const ml_mlb_tensor_src a = make("a", ML_DT_Q8, ML_SCALE_F32, 1, 64, q, &s);
    CHECK(ml_mlb_write(path.c_str(), &h, &a, 1, nullptr, 0, &err) == ML_E_ARG);
    CHECK(std::string(err.msg).find(path.string()) != std::string::npos);
    CHECK(std::string(err.msg).find("a directory") != std::string::npos);
    CHECK(dir.count() == 1);  // only the directory itself
    CHECK(fs::is_directory(path / "occupied"));
  }
}

TEST_CASE("ml_mlb_encode_tensor keeps at least one NUL after the name", "[format]") {
  ml_mlb_tensor t;
  std::memset(t.name, 'n', sizeof t.name);  // no NUL at all
  t.type = ML_DT_Q4;
  uint8_t out[ML_MLB_DIR_ENTRY_SIZE];
  ml_mlb_encode_tensor(&t, out);
  CHECK(out[46] == 'n');
  CHECK(out[47] == 0);
  CHECK(out[48] == ML_DT_Q4);
}

TEST_CASE("a file from ml_mlb_write parses back with ml_mlb_parse", "[format]") {
  ml_test_dir dir;
  const uint32_t st = GENERATE(ML_SCALE_F32, ML_SCALE_F16);
  const uint32_t sbytes = st == ML_SCALE_F32 ? 4 : 2;
  const ml_mlb_header h = distinct_header(st);
  const auto norm = pattern(64 * 4, 1);
  const auto q4 = pattern(5 * 96 / 2, 4), q4s = pattern(5 * 3 * sbytes, 5);
  const auto q8 = pattern(2 * 32, 2), q8s = pattern(2 * sbytes, 3);
  const std::vector<ml_mlb_tensor_src> t = {
      make("blk.0.attn_norm", ML_DT_F32, 0, 1, 64, norm, nullptr),
      make("blk.0.ffn_down", ML_DT_Q4, st, 5, 96, q4, &q4s),
      make("tok_embd", ML_DT_Q8, st, 2, 32, q8, &q8s),
  };
  const auto tok = pattern(77, 9);
  const bool with_tok = GENERATE(true, false);
  const fs::path path = dir.p / "m.mlb";
  ml_error err;
  REQUIRE(ml_mlb_write(path.c_str(), &h, t.data(), t.size(), with_tok ? tok.data() : nullptr, with_tok ? tok.size() : 0,
                       &err) == ML_OK);
  const auto b = ml_test_read(path);
  ml_mlb m;
  INFO(err.msg);
  REQUIRE(ml_mlb_parse(&m, b.data(), b.size(), &err) == ML_OK);
  CHECK(m.h.dim == h.dim);
  CHECK(m.h.hidden_dim == h.hidden_dim);
  CHECK(m.h.head_dim == h.head_dim);
  CHECK(m.h.vocab_size == h.vocab_size);
  CHECK(m.h.scale_type == st);
  CHECK(m.h.norm_eps == h.norm_eps);
  CHECK(m.h.rope_theta == h.rope_theta);
  CHECK(m.h.rope_high_freq_factor == h.rope_high_freq_factor);
  CHECK(m.h.linear_conv == h.linear_conv);
  CHECK(m.h.hidden_dim_orig == h.hidden_dim_orig);
  CHECK(m.h.file_size == b.size());
  REQUIRE(m.n_tensors == 3);
  for (uint32_t i = 0; i < 3; ++i) {
    const ml_mlb_tensor e = ml_mlb_tensor_at(&m, i);
    CHECK(std::string(e.name) == t[i].t.name);
    CHECK(e.type == t[i].t.type);
    CHECK(e.rows == t[i].t.rows);
    CHECK(e.cols == t[i].t.cols);
    CHECK(std::memcmp(b.data() + e.data_offset, t[i].data, e.data_size) == 0);
    if (t[i].scales) CHECK(std::memcmp(b.data() + e.scale_offset, t[i].scales, e.scale_size) == 0);
  }
  ml_mlb_tensor found;
  REQUIRE(ml_mlb_find(&m, "tok_embd", &found));
  CHECK(found.rows == 2);
  CHECK_FALSE(ml_mlb_find(&m, "output", &found));
  if (with_tok) {
    CHECK(m.tokenizer_kind == 1);
    REQUIRE(m.tokenizer_size == tok.size());
    CHECK(std::memcmp(m.tokenizer, tok.data(), tok.size()) == 0);
  } else {
    CHECK(m.tokenizer == nullptr);
  }
}
