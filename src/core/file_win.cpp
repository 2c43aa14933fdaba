// Windows file access (core/file.h): CreateFileW on the UTF-16 path, CreateFileMapping +
// MapViewOfFile, or ReadFile into an aligned buffer (ML_NO_MMAP, or when mapping fails).
// The identity listed for core/out_file.h is the volume serial number and the file index.
// There is no unlinked temporary file here (ml_file_temp gives -1): a model converted at load
// stays in memory, and ml_file_release is a no-op (a read-only view's pages are clean; Windows
// drops them under pressure by itself).
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <io.h>
#include <sys/stat.h>
#include <windows.h>

#include "core/aligned.h"
#include "core/file.h"
#include "core/file_common.h"
#include "core/win_path.h"

namespace {

ml_status read_handle(HANDLE h, const char* path, size_t size, ml_file* f, ml_error* err) {
  uint8_t* buf = static_cast<uint8_t*>(ml_aligned_alloc(64, size));
  if (!buf) return ml_fail(err, ML_E_NOMEM, "%s: cannot allocate %zu bytes to read it", path, size);
  size_t got = 0;
  while (got < size) {
    const DWORD want = (DWORD)(size - got < ((size_t)1 << 30) ? size - got : (size_t)1 << 30);
    DWORD r = 0;
    if (!ReadFile(h, buf + got, want, &r, nullptr) || r == 0) {
      char msg[256];
      const DWORD e = GetLastError();
      ml_aligned_free(buf);
      return ml_fail(err, ML_E_IO, "%s: read failed at byte %zu: %s", path, got,
                     r == 0 && e == 0 ? "unexpected end of file" : ml_win_error(e, msg, sizeof msg));
    }
    got += r;
  }
  ml_file_own(f, buf, size, false);
  return ML_OK;
}

bool map_handle(ml_file* f, HANDLE h, size_t size) {
#if !ML_NO_MMAP
  if (size == 0) return false;
  HANDLE m = CreateFileMappingW(h, nullptr, PAGE_READONLY, 0, 0, nullptr);
  if (!m) return false;
  void* p = MapViewOfFile(m, FILE_MAP_READ, 0, 0, size);
  CloseHandle(m);  // the view keeps the mapping alive
  if (!p) return false;
  ml_file_own(f, p, size, true);
  return true;
#else
  (void)f; (void)h; (void)size;
  return false;
#endif
}

}  // namespace

ml_status ml_file_open(ml_file* f, const char* path, ml_error* err) {
  *f = ml_file{};
  ml_wpath w;
  if (!ml_win_widen(path, &w)) return ml_fail(err, ML_E_ARG, "%s: not a valid UTF-8 path", path);
  // FILE_FLAG_BACKUP_SEMANTICS opens a directory too, so that it is named as one below.
  HANDLE h = CreateFileW(w.p, GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, nullptr,
                         OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL | FILE_FLAG_BACKUP_SEMANTICS, nullptr);
  char msg[256];
  if (h == INVALID_HANDLE_VALUE)
    return ml_fail(err, ML_E_IO, "%s: cannot open: %s", path, ml_win_error(GetLastError(), msg, sizeof msg));
  if (const char* kind = ml_win_kind(h)) {
    CloseHandle(h);
    return ml_fail(err, ML_E_ARG, "%s: is %s, not a regular file", path, kind);
  }
  if (!ml_win_file_id(h, &f->id)) {
    const DWORD e = GetLastError();
    CloseHandle(h);
    return ml_fail(err, ML_E_IO, "%s: cannot stat: %s", path, ml_win_error(e, msg, sizeof msg));
  }
  if (f->id.size > (uint64_t)SIZE_MAX) {
    CloseHandle(h);
    return ml_fail(err, ML_E_NOMEM, "%s: %llu bytes do not fit in this address space", path,
                   (unsigned long long)f->id.size);
  }
  const size_t size = (size_t)f->id.size;
  const ml_file_id id = f->id;
  ml_status s = ML_OK;
  if (!map_handle(f, h, size)) s = read_handle(h, path, size, f, err);
  CloseHandle(h);
  f->id = id;
  if (s == ML_OK) f->input_slot = ml_file_input_add(id.dev, id.ino, path);
  return s;
}

void ml_file_adopt(ml_file* f, void* data, size_t size) {
  ml_file_borrow(f, data, size);
  f->borrowed = false;  // close frees it
}

int ml_file_temp() { return -1; }

long ml_fd_write(int fd, const void* p, size_t n) {
  return ::_write(fd, p, (unsigned)(n < ((size_t)1 << 30) ? n : (size_t)1 << 30));
}

ml_status ml_file_adopt_temp(ml_file* f, int fd, size_t size, ml_error* err) {
  *f = ml_file{};
  HANDLE h = reinterpret_cast<HANDLE>(::_get_osfhandle(fd));
  ml_status s = ML_OK;
  if (h == INVALID_HANDLE_VALUE) s = ml_fail(err, ML_E_IO, "the temporary file: not open");
  if (s == ML_OK && !map_handle(f, h, size)) {
    LARGE_INTEGER zero{};
    if (!SetFilePointerEx(h, zero, nullptr, FILE_BEGIN))
      s = ml_fail(err, ML_E_IO, "the temporary file: cannot seek");
    if (s == ML_OK) s = read_handle(h, "the temporary file", size, f, err);
  }
  ::_close(fd);
  return s;
}

void ml_file_release(const ml_file* f, size_t offset, size_t len) { (void)f; (void)offset; (void)len; }

void ml_file_unmap(const ml_file* f) { UnmapViewOfFile(f->data); }

bool ml_file_replace(const char* from, const char* to) {
  ml_wpath a, b;
  return ml_win_widen(from, &a) && ml_win_widen(to, &b) &&
         MoveFileExW(a.p, b.p, MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH);
}

const char* ml_file_kind(unsigned mode) {
  switch (mode & _S_IFMT) {
    case _S_IFDIR: return "a directory";
    case _S_IFIFO: return "a pipe";
    case _S_IFCHR: return "a character device";
    case _S_IFREG: return "a regular file";
    default: return "a special file";
  }
}
