// Windows helpers (core/win_path.h).
#include "core/win_path.h"

#include <cstdio>
#include <cstring>

#include <windows.h>

bool ml_win_widen(const char* utf8, ml_wpath* out) {
  std::free(out->p);
  out->p = nullptr;
  const int n = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, utf8, -1, nullptr, 0);
  if (n <= 0) return false;
  out->p = static_cast<wchar_t*>(std::malloc(sizeof(wchar_t) * (size_t)n));
  if (!out->p) return false;
  return MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, utf8, -1, out->p, n) == n;
}

const char* ml_win_error(unsigned long code, char* buf, size_t cap) {
  if (cap == 0) return buf;
  DWORD n = FormatMessageA(FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS, nullptr, code,
                           MAKELANGID(LANG_ENGLISH, SUBLANG_DEFAULT), buf, (DWORD)cap, nullptr);
  if (n == 0) n = (DWORD)std::snprintf(buf, cap, "Windows error %lu", code);
  if (n >= cap) n = (DWORD)cap - 1;
  while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ' || buf[n - 1] == '.')) --n;
  buf[n] = 0;
  return buf;
}

bool ml_win_file_id(void* handle, ml_file_id* id) {
  BY_HANDLE_FILE_INFORMATION info;
  if (!GetFileInformationByHandle(static_cast<HANDLE>(handle), &info)) return false;
  const auto ns = [](LARGE_INTEGER t) { return (int64_t)t.QuadPart * 100; };
  id->dev = info.dwVolumeSerialNumber;
  id->ino = (uint64_t)info.nFileIndexHigh << 32 | info.nFileIndexLow;
  id->size = (uint64_t)info.nFileSizeHigh << 32 | info.nFileSizeLow;
  FILE_BASIC_INFO basic;
  if (GetFileInformationByHandleEx(static_cast<HANDLE>(handle), FileBasicInfo, &basic, sizeof basic)) {
    id->mtime_ns = ns(basic.LastWriteTime);
    id->ctime_ns = ns(basic.ChangeTime);
  } else {
    id->mtime_ns = (int64_t)((uint64_t)info.ftLastWriteTime.dwHighDateTime << 32 | info.ftLastWriteTime.dwLowDateTime) * 100;
    id->ctime_ns = id->mtime_ns;
  }
  return true;
}

const char* ml_win_kind(void* handle) {
  switch (GetFileType(static_cast<HANDLE>(handle))) {
    case FILE_TYPE_DISK: break;
    case FILE_TYPE_PIPE: return "a pipe";
    case FILE_TYPE_CHAR: return "a character device";
    default: return "a special file";
  }
  BY_HANDLE_FILE_INFORMATION info;
  if (GetFileInformationByHandle(static_cast<HANDLE>(handle), &info) &&
      (info.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY))
    return "a directory";
  return nullptr;
}
