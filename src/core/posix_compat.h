// The few POSIX names the MinGW-w64 C runtime lacks, for code outside core's file access that
// uses plain POSIX calls (the pack cache, the Hugging Face folder checks, the model-kind sniff).
// Nothing on POSIX systems. Core's own file access has real Windows versions (file_win.cpp,
// out_file_win.cpp); these calls take the path in the ANSI code page, not UTF-8.
#pragma once
#ifdef _WIN32
#include <ctime>

#include <fcntl.h>
#include <io.h>
#include <process.h>
#include <sys/stat.h>

#ifndef O_CLOEXEC
#define O_CLOEXEC 0
#endif
#ifndef O_NONBLOCK
#define O_NONBLOCK 0
#endif
#ifndef O_NOCTTY
#define O_NOCTTY 0
#endif

inline int fsync(int fd) { return _commit(fd); }
// Windows has no symbolic links that the C runtime would show: stat is lstat.
inline int lstat(const char* path, struct stat* st) { return stat(path, st); }
inline struct tm* localtime_r(const time_t* t, struct tm* out) { return localtime_s(out, t) == 0 ? out : nullptr; }
#endif
