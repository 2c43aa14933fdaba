// Helpers of the file tests (test_out_file.cpp, POSIX only; test_out_file_portable.cpp, every OS).
#pragma once
#include <filesystem>
#include <string>

#include "core/out_file.h"

namespace ml_test_files {

namespace fs = std::filesystem;

inline bool contains(const char* msg, const std::string& s) { return std::string(msg).find(s) != std::string::npos; }

// A path as the UTF-8 text krafla takes (fs::path::string() is the ANSI code page on Windows).
inline std::string u8(const fs::path& p) {
  const std::u8string s = p.u8string();
  return std::string(s.begin(), s.end());
}

// Writes s to p through ml_out_open/write/commit; input, when given, is the one input to refuse.
inline ml_status write_file(const fs::path& p, const std::string& s, ml_error* err, const char* input = nullptr) {
  ml_out_file o;
  ML_TRY(ml_out_open(&o, u8(p).c_str(), input ? &input : nullptr, input ? 1 : 0, err));
  ml_status st = ml_out_write(&o, s.data(), s.size(), err);
  if (st == ML_OK) st = ml_out_commit(&o, err);
  ml_out_discard(&o);
  return st;
}

}  // namespace ml_test_files
