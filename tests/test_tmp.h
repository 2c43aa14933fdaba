// A fresh scratch folder under the system's temporary folder (std::filesystem::temp_directory_path),
// unique even where getpid is a constant (Emscripten) and when CTest runs cases as parallel
// processes: mkdtemp on POSIX; on Windows (no mkdtemp) a random name made with create_directory,
// which fails when the name exists.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#ifndef _WIN32
#include <unistd.h>
#endif

// prefix: the folder name's start ("krafla-api-"); "" when no folder could be made.
inline std::string ml_test_mkdtemp(const std::string& prefix) {
  std::error_code ec;
  const std::filesystem::path base = std::filesystem::temp_directory_path(ec);
  if (ec) return "";
#ifndef _WIN32
  std::string t = (base / (prefix + "XXXXXX")).string();
  return mkdtemp(t.data()) ? t : "";
#else
  std::random_device rd;
  for (int i = 0; i < 100; ++i) {
    const std::filesystem::path p = base / (prefix + std::to_string(rd()));
    if (std::filesystem::create_directory(p, ec)) return p.string();
  }
  return "";
#endif
}
