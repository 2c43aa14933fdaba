// Helpers shared by the unit tests: the shared/ data folder, a scratch folder per test case, and
// whole-file reads and writes.
#pragma once
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

#include "test_tmp.h"

// The shared/ folder with real models and data: $KRAFLA_SHARED, else the configured default.
inline std::string ml_test_shared(const std::string& rel = "") {
  const char* env = std::getenv("KRAFLA_SHARED");
  std::string base = env && *env ? env : ML_SHARED_DIR_DEFAULT;
  return rel.empty() ? base : base + "/" + rel;
}

// A fresh, empty folder per test case, removed with everything in it at the end. mkdtemp makes
// the name unique even where getpid is a constant (Emscripten) and CTest runs cases as parallel
// processes.
struct ml_test_dir {
  std::filesystem::path p;
  ml_test_dir() {
    const std::string t = ml_test_mkdtemp("krafla_dir_");
    REQUIRE(!t.empty());
    p = t;
  }
  ~ml_test_dir() {
    std::error_code ec;
    std::filesystem::remove_all(p, ec);
  }
  ml_test_dir(const ml_test_dir&) = delete;
  ml_test_dir& operator=(const ml_test_dir&) = delete;
  std::string operator/(const std::string& name) const { return (p / name).string(); }
  // The number of entries in the folder (a leftover temporary file shows here).
  int count() const {
    return (int)std::distance(std::filesystem::directory_iterator(p), std::filesystem::directory_iterator());
  }
};

// A whole file's bytes, as T (std::vector<uint8_t>, std::vector<char> or std::string).
template <class T = std::vector<uint8_t>>
T ml_test_read(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  REQUIRE(in.good());
  return T((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Writes (replaces) a whole file.
inline void ml_test_write(const std::filesystem::path& p, const void* data, size_t n) {
  std::ofstream out(p, std::ios::binary);
  out.write(static_cast<const char*>(data), (std::streamsize)n);
  REQUIRE(out.good());
}
inline void ml_test_write(const std::filesystem::path& p, const std::string& s) { ml_test_write(p, s.data(), s.size()); }
inline void ml_test_write(const std::filesystem::path& p, const std::vector<uint8_t>& b) {
  ml_test_write(p, b.data(), b.size());
}
