// Windows helpers for core/file_win.cpp and core/out_file_win.cpp: paths are UTF-8 everywhere in
// krafla and become UTF-16 for the W calls; the OS error as text; a file's identity.
#pragma once
#ifdef _WIN32
#include <cstddef>
#include <cstdlib>

#include "core/file.h"

// A UTF-16 copy of a UTF-8 path (malloc'd; freed with the object).
struct ml_wpath {
  wchar_t* p = nullptr;
  ml_wpath() = default;
  ml_wpath(const ml_wpath&) = delete;
  ml_wpath& operator=(const ml_wpath&) = delete;
  ~ml_wpath() { std::free(p); }
};

// false when utf8 is not valid UTF-8 or there is no memory.
bool ml_win_widen(const char* utf8, ml_wpath* out);

// The message of a GetLastError() code, without its trailing newline, in buf (which it returns).
const char* ml_win_error(unsigned long code, char* buf, size_t cap);

// Identity and times of an open handle: dev = volume serial number, ino = the 64-bit file index
// (GetFileInformationByHandle), size, last-write and change times in ns since 1601. false when
// the handle gives none.
bool ml_win_file_id(void* handle, ml_file_id* id);

// What an open handle is when it is not a regular file ("a directory", "a pipe", "a character
// device"), or nullptr for a regular file.
const char* ml_win_kind(void* handle);
#endif
