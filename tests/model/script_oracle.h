// Helpers for tests that ask an external interpreter (python3, node) for the expected results:
// the script is embedded in the test, written to a temporary file and run with popen; its stdout
// comes back as a string. When the interpreter is missing the caller SKIPs (reported with WARN).
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

// A temporary file path unique to this process.
inline std::string ml_test_tmp(const std::string& name) {
  const char* d = std::getenv("TMPDIR");
  return std::string(d && *d ? d : "/tmp") + "/ml_test_" + std::to_string((long)getpid()) + "_" + name;
}

inline void ml_test_write(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

// Runs a shell command; its stdout, and *rc its exit status.
inline std::string ml_test_run(const std::string& cmd, int* rc) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) {
    *rc = -1;
    return out;
  }
  char buf[65536];
  size_t k;
  while ((k = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, k);
  int st = pclose(p);
  *rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

// True when `prog --version` runs through popen and prints something (false under Emscripten,
// whose system() reports success without running anything and whose popen fails).
inline bool ml_test_have(const std::string& prog) {
  int rc = -1;
  std::string out = ml_test_run(prog + " --version 2>/dev/null", &rc);
  return rc == 0 && !out.empty();
}

// The repository root, found from this file's compiled path (absolute, or relative to the build
// directory two levels above the test binary's folder); empty when not found.
inline std::string ml_test_source_root() {
  std::string f = __FILE__;
  std::string suffix = "tests/model/script_oracle.h";
  std::string cands[2] = {f, ""};
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = 0;
    std::string e = exe;
    e = e.substr(0, e.rfind('/'));  // .../build/<preset>/bin
    cands[1] = e + "/../" + f;
  }
  for (const std::string& c : cands) {
    if (c.size() < suffix.size() || c.compare(c.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    std::ifstream t(c);
    if (t.good()) return c.substr(0, c.size() - suffix.size());
  }
  return "";
}
