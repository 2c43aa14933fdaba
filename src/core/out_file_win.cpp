// Windows output files (core/out_file.h): the same contract as out_file.cpp with Windows calls.
// The temporary file "<target>.tmp.<pid>" is created with CREATE_NEW (O_EXCL), written through
// a C runtime descriptor, flushed (_commit: FlushFileBuffers) and moved over the target with
// MoveFileExW(MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH). "Same file" is the same volume
// serial number and file index (GetFileInformationByHandle). Differences from POSIX: a symbolic
// link at the target is replaced, not followed; permissions are not copied (Windows ACLs are
// inherited from the folder); the cleanup runs on SIGINT, SIGTERM and SIGBREAK (Ctrl-C/Break).
// The writes, the table and the discard are out_file_common.cpp's, as for POSIX.
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <io.h>
#include <windows.h>

#include "core/file.h"
#include "core/out_file.h"
#include "core/out_file_common.h"
#include "core/win_path.h"

namespace {

std::atomic<bool> g_installed{false};
const int CLEANUP_SIGNALS[] = {SIGINT, SIGTERM, SIGBREAK};

// The C runtime runs a console signal's handler on a thread of its own, so the wide conversion
// and DeleteFileW (ml_out_os_remove) are safe here.
extern "C" void ml_cleanup_on_signal(int sig) {
  ml_cleanup_remove_listed();
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

// Opens path for its identity only (no read or write access; a directory too). INVALID_HANDLE_VALUE
// when it cannot be opened.
HANDLE open_meta(const char* path) {
  ml_wpath w;
  if (!ml_win_widen(path, &w)) return INVALID_HANDLE_VALUE;
  return CreateFileW(w.p, 0, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, nullptr, OPEN_EXISTING,
                     FILE_FLAG_BACKUP_SEMANTICS, nullptr);
}

ml_status check_not_an_input(const char* path, const ml_file_id& id, const char* const* inputs, size_t n_inputs,
                             ml_error* err) {
  for (size_t i = 0; i < n_inputs; ++i) {
    if (!inputs[i]) continue;
    HANDLE h = open_meta(inputs[i]);
    if (h == INVALID_HANDLE_VALUE) continue;
    ml_file_id in;
    const bool same = ml_win_file_id(h, &in) && in.dev == id.dev && in.ino == id.ino;
    CloseHandle(h);
    if (same)
      return ml_fail(err, ML_E_ARG, "%s is the same file as the input %s; refusing to overwrite it", path, inputs[i]);
  }
  char open_path[512];
  if (ml_file_find_input(id.dev, id.ino, open_path, sizeof open_path))
    return ml_fail(err, ML_E_ARG, "%s is the same file as the input %s; refusing to overwrite it", path, open_path);
  return ML_OK;
}

// Refuses a target that exists and is not a regular file (ML_E_ARG), fills *id when it exists.
ml_status check_target(const char* path, bool* exists, ml_file_id* id, ml_error* err) {
  *exists = false;
  ml_wpath w;
  if (!ml_win_widen(path, &w)) return ml_fail(err, ML_E_ARG, "%s: not a valid UTF-8 path", path);
  char msg[256];
  if (GetFileAttributesW(w.p) == INVALID_FILE_ATTRIBUTES) {
    const DWORD e = GetLastError();
    if (e == ERROR_FILE_NOT_FOUND || e == ERROR_PATH_NOT_FOUND) return ML_OK;
    return ml_fail(err, ML_E_IO, "%s: cannot stat: %s", path, ml_win_error(e, msg, sizeof msg));
  }
  HANDLE h = open_meta(path);
  if (h == INVALID_HANDLE_VALUE)
    return ml_fail(err, ML_E_IO, "%s: cannot open: %s", path, ml_win_error(GetLastError(), msg, sizeof msg));
  const char* kind = ml_win_kind(h);
  const bool got = !kind && ml_win_file_id(h, id);
  CloseHandle(h);
  if (kind) return ml_fail(err, ML_E_ARG, "%s: is %s; an output must be a regular file or a new path", path, kind);
  if (!got) return ml_fail(err, ML_E_IO, "%s: cannot stat", path);
  *exists = true;
  return ML_OK;
}

}  // namespace

int ml_out_os_sync(int fd) { return ::_commit(fd); }
int ml_out_os_close(int fd) { return ::_close(fd); }
void ml_out_os_remove(const char* path) {
  ml_wpath w;
  if (ml_win_widen(path, &w)) DeleteFileW(w.p);
}

void ml_cleanup_install() {
  if (g_installed.exchange(true)) return;
  for (int s : CLEANUP_SIGNALS) {
    const auto old = std::signal(s, ml_cleanup_on_signal);
    if (old == SIG_IGN) std::signal(s, SIG_IGN);  // a signal the process was started ignoring stays so
  }
}

ml_status ml_out_open(ml_out_file* o, const char* path, const char* const* inputs, size_t n_inputs, ml_error* err) {
  *o = ml_out_file{};
  if (!path || !*path) return ml_fail(err, ML_E_ARG, "no output path given");
  if (!ml_out_copy_path(o->path, path)) return ml_fail(err, ML_E_ARG, "%.200s...: output path too long", path);
  bool exists = false;
  ml_file_id id;
  ML_TRY(check_target(path, &exists, &id, err));
  if (exists) ML_TRY(check_not_an_input(path, id, inputs, n_inputs, err));

  o->buf = static_cast<uint8_t*>(std::malloc(ML_OUT_BUF_SIZE));
  if (!o->buf) return ml_fail(err, ML_E_NOMEM, "%s: cannot allocate the write buffer", o->path);
  const unsigned long pid = GetCurrentProcessId();
  for (int k = 0; o->fd < 0; ++k) {
    ml_out_tmp_name(o, pid, k);  // fits: ml_out_copy_path left room
    ml_wpath w;
    if (!ml_win_widen(o->tmp, &w)) {
      o->tmp[0] = 0;
      ml_out_discard(o);
      return ml_fail(err, ML_E_ARG, "%s: not a valid UTF-8 path", path);
    }
    HANDLE h = CreateFileW(w.p, GENERIC_WRITE, 0, nullptr, CREATE_NEW, FILE_ATTRIBUTE_NORMAL, nullptr);
    if (h == INVALID_HANDLE_VALUE) {
      const DWORD e = GetLastError();
      if ((e == ERROR_FILE_EXISTS || e == ERROR_ALREADY_EXISTS) && k < 100) continue;  // a stale file
      o->tmp[0] = 0;
      ml_out_discard(o);
      char msg[256];
      return ml_fail(err, ML_E_IO, "cannot create a temporary file next to %s: %s", o->path,
                     ml_win_error(e, msg, sizeof msg));
    }
    o->fd = ::_open_osfhandle(reinterpret_cast<intptr_t>(h), _O_WRONLY | _O_BINARY);
    if (o->fd < 0) {
      CloseHandle(h);
      ml_out_discard(o);
      return ml_fail(err, ML_E_IO, "%s: cannot open the temporary file", o->path);
    }
    o->cleanup_slot = ml_cleanup_add(o->tmp);
    if (o->cleanup_slot < 0) {
      ml_out_discard(o);
      return ml_fail(err, ML_E_NOMEM, "%s: too many output files open at once", o->path);
    }
  }
  return ML_OK;
}

ml_status ml_out_commit(ml_out_file* o, ml_error* err) {
  ML_TRY(ml_out_flush_close(o, err));
  bool exists = false;
  ml_file_id id;
  const ml_status st = check_target(o->path, &exists, &id, err);  // it became a directory, a device...
  if (st != ML_OK) {
    ml_out_discard(o);
    return st;
  }
  ml_wpath from, to;
  char msg[256];
  if (!ml_win_widen(o->tmp, &from) || !ml_win_widen(o->path, &to) ||
      !MoveFileExW(from.p, to.p, MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH)) {
    const DWORD le = GetLastError();
    ml_out_discard(o);
    return ml_fail(err, ML_E_IO, "cannot write %s: rename failed: %s", o->path, ml_win_error(le, msg, sizeof msg));
  }
  ml_out_committed(o);
  return ML_OK;
}
