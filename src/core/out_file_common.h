// The platform-neutral part of core/out_file.h, shared by out_file.cpp (POSIX) and out_file_win.cpp
// (Windows): the write buffer, the signal handler's table, ml_out_write, ml_out_discard and the
// first and last steps of a commit. Each platform file has ml_out_open, the rename in
// ml_out_commit, ml_cleanup_install, and the three calls under "Per platform".
#pragma once
#include <cstddef>

#include "core/out_file.h"

inline constexpr size_t ML_OUT_BUF_SIZE = size_t(1) << 18;

// ---- Per platform (out_file.cpp, out_file_win.cpp) ----
// fsync / _commit, close / _close of the temporary file's descriptor: 0, or -1 with errno set.
int ml_out_os_sync(int fd);
int ml_out_os_close(int fd);
// unlink / DeleteFileW of a UTF-8 path. The POSIX one is async-signal-safe (the handler calls it).
void ml_out_os_remove(const char* path);

// ---- Shared (out_file_common.cpp) ----
// Copies src to dst (ML_OUT_PATH_MAX bytes) when it fits with room for ".tmp.<pid>.<k>".
bool ml_out_copy_path(char* dst, const char* src);
// Names o->tmp "<target>.tmp.<pid>" (k 0) or "<target>.tmp.<pid>.<k>"; false when it does not fit.
bool ml_out_tmp_name(ml_out_file* o, unsigned long pid, int k);
// The signal handler's body: ml_out_os_remove on every temporary file listed.
void ml_cleanup_remove_listed();
// A failed write: the temporary file goes at once, and the error (errno e) sticks.
ml_status ml_out_fail_write(ml_out_file* o, int e, ml_error* err);
// The first step of a commit: the sticky error, the buffer written, synced, the descriptor closed.
// After ML_OK, o->fd is -1 and o->tmp holds every byte; on failure nothing of it is left.
ml_status ml_out_flush_close(ml_out_file* o, ml_error* err);
// The last step of a commit, after the rename: the temporary file is the target now.
void ml_out_committed(ml_out_file* o);
