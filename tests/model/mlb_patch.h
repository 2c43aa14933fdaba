// Patching a copy of a valid .mlb in a test: little-endian field writes, the offset of a named
// directory entry, and loading the result from memory. For the loader's and the limits' tests.
#pragma once
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

#include "model/model.h"

namespace mlb_patch {

using bytes = std::vector<uint8_t>;

inline void put32(bytes& b, size_t off, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[off + i] = (uint8_t)(v >> (8 * i));
}
inline void put64(bytes& b, size_t off, uint64_t v) {
  for (int i = 0; i < 8; ++i) b[off + i] = (uint8_t)(v >> (8 * i));
}
inline uint64_t get64(const bytes& b, size_t off) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | b[off + i];
  return v;
}

// Offset of the directory entry named name.
inline size_t entry(const bytes& b, const char* name) {
  const uint32_t n = b[148] | b[149] << 8 | b[150] << 16 | (uint32_t)b[151] << 24;
  for (uint32_t i = 0; i < n; ++i) {
    const size_t off = 256 + (size_t)i * 96;
    if (std::strncmp(reinterpret_cast<const char*>(&b[off]), name, 48) == 0) return off;
  }
  FAIL("no tensor " << name);
  return 0;
}

// Loads b from memory; returns the status and leaves the message in err.
inline ml_status load(const bytes& b, ml_error* err) {
  ml_model m;
  const ml_status s = ml_model_load_memory(&m, b.data(), b.size(), err);
  if (s == ML_OK) ml_model_free(&m);
  return s;
}

}  // namespace mlb_patch
