// Helpers shared by the unit tests.
#pragma once
#include <cstdlib>
#include <string>

// The shared/ folder with real models and data: $KRAFLA_SHARED, else the configured default.
inline std::string ml_test_shared(const std::string& rel = "") {
  const char* env = std::getenv("KRAFLA_SHARED");
  std::string base = env && *env ? env : ML_SHARED_DIR_DEFAULT;
  return rel.empty() ? base : base + "/" + rel;
}
