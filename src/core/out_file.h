// Writing an output file so that a failure or a signal never leaves a partial file, and an output
// never destroys something it should not. Every program that writes a file goes through this.
//
//   ml_out_open    checks the target: it must be a regular file or a new path (a symbolic link is
//                  followed to the file it names), and not the same file (st_dev and st_ino) as
//                  any input listed or open through ml_file_open; then creates "<target>.tmp.<pid>"
//                  in the target's directory with O_EXCL and lists it for the signal handler.
//   ml_out_write   buffered writes; the first failure sticks, and every later call returns it.
//   ml_out_commit  flushes, fsyncs, checks the target again and renames the temporary over it.
//   ml_out_discard removes the temporary file (a no-op after commit; safe to call twice).
// Every failure path removes the temporary file; the target is never touched unless the rename
// succeeds. Refusals (non-regular target, same file as an input) are ML_E_ARG, before anything
// is created; OS failures are ML_E_IO naming the path and the OS error.
//
// The cleanup handler (ml_cleanup_install) unlinks every listed temporary file on SIGTERM,
// SIGINT, SIGHUP or SIGQUIT and then dies of the same signal. It uses only a fixed table, unlink
// and raise, so it is async-signal-safe.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/status.h"

inline constexpr size_t ML_OUT_PATH_MAX = 4096;

struct ml_out_file {
  int fd = -1;
  int cleanup_slot = -1;     // the temporary file's entry in the signal handler's table
  int error = 0;             // errno of the first failed write; sticky
  uint8_t* buf = nullptr;    // write buffer
  size_t fill = 0;           // bytes in buf
  uint64_t written = 0;      // bytes accepted by ml_out_write
  unsigned mode = 0;         // the replaced file's permission bits, or 0 for a new file
  char path[ML_OUT_PATH_MAX] = {0};  // the target (a symbolic link resolved)
  char tmp[ML_OUT_PATH_MAX] = {0};   // the temporary file, "" when there is none
};

// inputs (n_inputs paths, any may be null or missing) are files the output must not be; the files
// open through ml_file_open are checked too.
ml_status ml_out_open(ml_out_file* o, const char* path, const char* const* inputs, size_t n_inputs, ml_error* err);
ml_status ml_out_write(ml_out_file* o, const void* data, size_t n, ml_error* err);
ml_status ml_out_commit(ml_out_file* o, ml_error* err);
void ml_out_discard(ml_out_file* o);

// The signal handler's table: adds path (copied) and returns its slot, or -1 when the table is
// full or the path too long; remove takes the slot back (-1 is ignored).
int ml_cleanup_add(const char* path);
void ml_cleanup_remove(int slot);
// Installs the handler for SIGTERM, SIGINT, SIGHUP and SIGQUIT (a signal the process was started
// ignoring stays ignored). Idempotent.
void ml_cleanup_install();
