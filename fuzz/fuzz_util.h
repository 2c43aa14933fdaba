// Helpers shared by the libFuzzer harnesses (fuzz/*.cpp): a private temporary folder per process,
// whole-file writes and the shared/ folder. Header-only and layer-free (libc and POSIX only), so
// a harness of an internal parser still compiles against its own layer's include root.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fz {

// A folder of its own under $TMPDIR (one per process: libFuzzer's -jobs/-workers fork), made once
// and removed at exit.
inline const std::string& tmp_dir() {
  static std::string dir = [] {
    const char* base = std::getenv("TMPDIR");
    std::string t = std::string(base && *base ? base : "/tmp") + "/krafla-fuzz-XXXXXX";
    if (!mkdtemp(t.data())) {
      std::perror("mkdtemp");
      std::abort();
    }
    return t;
  }();
  return dir;
}

inline std::string tmp_path(const char* name) { return tmp_dir() + "/" + name; }

inline bool write_file(const std::string& path, const void* data, size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  const bool ok = std::fwrite(data, 1, size, f) == size;
  return std::fclose(f) == 0 && ok;
}

inline bool read_file(const std::string& path, std::string* out) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  out->clear();
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out->append(buf, n);
  std::fclose(f);
  return true;
}

// Removes every entry of dir except those in keep (null-terminated list of names); not recursive
// into kept folders, recursive otherwise.
inline void clean_dir(const std::string& dir, const char* const* keep) {
  DIR* d = opendir(dir.c_str());
  if (!d) return;
  while (dirent* e = readdir(d)) {
    const char* n = e->d_name;
    if (!std::strcmp(n, ".") || !std::strcmp(n, "..")) continue;
    bool kept = false;
    for (const char* const* k = keep; k && *k; ++k) kept = kept || !std::strcmp(*k, n);
    if (kept) continue;
    const std::string p = dir + "/" + n;
    struct stat st;
    if (lstat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      clean_dir(p, nullptr);
      rmdir(p.c_str());
    } else {
      unlink(p.c_str());
    }
  }
  closedir(d);
}

// KRAFLA_SHARED (scripts/test exports it), else the build's default (../shared).
inline std::string shared_dir() {
  const char* s = std::getenv("KRAFLA_SHARED");
#ifdef ML_SHARED_DIR_DEFAULT
  return s && *s ? s : ML_SHARED_DIR_DEFAULT;
#else
  return s && *s ? s : "../shared";
#endif
}

// The seed folder the runner (fuzz/run.py) asks a harness to write generated seeds into, or null.
inline const char* seed_dir() {
  const char* s = std::getenv("ML_FUZZ_SEED_DIR");
  return s && *s ? s : nullptr;
}

// Removes the temporary folder at exit (registered by the harnesses that use it).
inline void remove_tmp_at_exit() {
  static bool done = false;
  if (done) return;
  done = true;
  tmp_dir();  // made before the handler is registered, so its string outlives the handler
  std::atexit([] {
    clean_dir(tmp_dir(), nullptr);
    rmdir(tmp_dir().c_str());
  });
}

}  // namespace fz
