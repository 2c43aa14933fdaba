// A converted .mlb read back for the converter tests: the whole file, parsed with the engine's own
// ml_mlb_parse, and its tensors' bytes and values by name; the bytes of a model converted at load.
#pragma once
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "convert/convert.h"
#include "core/file.h"
#include "model/format.h"
#include "test_util.h"

struct mlb_file {
  std::vector<uint8_t> bytes;
  ml_mlb m;
  explicit mlb_file(const std::string& path) : bytes(ml_test_read(path)) {
    ml_error err;
    REQUIRE(ml_mlb_parse(&m, bytes.data(), bytes.size(), &err) == ML_OK);
  }
  bool has(const std::string& name) const {
    ml_mlb_tensor t;
    return ml_mlb_find(&m, name.c_str(), &t);
  }
  ml_mlb_tensor get(const char* name) const {
    ml_mlb_tensor t;
    REQUIRE(ml_mlb_find(&m, name, &t));
    return t;
  }
  std::vector<uint8_t> data(const ml_mlb_tensor& t) const {
    return std::vector<uint8_t>(bytes.begin() + (long)t.data_offset, bytes.begin() + (long)(t.data_offset + t.data_size));
  }
  std::vector<uint8_t> scales(const ml_mlb_tensor& t) const {
    return std::vector<uint8_t>(bytes.begin() + (long)t.scale_offset,
                                bytes.begin() + (long)(t.scale_offset + t.scale_size));
  }
  // The tensor's values (Q8 with f32 scales dequantized) and, for Q8, each value's rounding bound
  // (half a step).
  std::vector<float> values(const std::string& name, uint32_t rows, uint32_t cols, std::vector<float>* bound = nullptr) const {
    ml_mlb_tensor t;
    INFO("tensor " << name);
    REQUIRE(ml_mlb_find(&m, name.c_str(), &t));
    REQUIRE(t.rows == rows);
    REQUIRE(t.cols == cols);
    std::vector<float> out(size_t(rows) * cols), b(out.size(), 0.0f);
    const uint8_t* d = bytes.data() + t.data_offset;
    if (t.type == ML_DT_F32) {
      std::memcpy(out.data(), d, out.size() * 4);
    } else {
      REQUIRE(t.type == ML_DT_Q8);
      REQUIRE(t.scale_type == ML_SCALE_F32);
      const float* s = reinterpret_cast<const float*>(bytes.data() + t.scale_offset);
      for (size_t i = 0; i < out.size(); ++i) {
        out[i] = (float)(int8_t)d[i] * s[i / 32];
        b[i] = s[i / 32] * 0.5f * 1.0001f + 1e-30f;
      }
    }
    if (bound) *bound = b;
    return out;
  }
};

// Where a conversion at load writes (cv_mem_out): the unlinked temporary file of core/file.h's
// ml_file_temp, which every build that maps files has; the memory buffer in the others (wasm).
inline cv_mem_out converted_out() {
  cv_mem_out out;
  out.fd = ml_file_temp();
#if !ML_NO_MMAP
  REQUIRE(out.fd >= 0);
#endif
  return out;
}

// The bytes a conversion at load wrote into out: mapped back from the temporary file
// (ml_file_adopt_temp, which closes it) or taken from the buffer (freed).
inline std::vector<uint8_t> converted_bytes(cv_mem_out* out) {
  std::vector<uint8_t> b;
  if (out->fd < 0) {
    b.assign(out->data, out->data + out->size);
    std::free(out->data);
    *out = cv_mem_out{};
    return b;
  }
  ml_file f;
  ml_error err;
  REQUIRE(ml_file_adopt_temp(&f, out->fd, out->size, &err) == ML_OK);
  *out = cv_mem_out{};
  CHECK(f.mapped);
  b.assign(f.data, f.data + f.size);
  ml_file_close(&f);
  return b;
}
