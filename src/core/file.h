// A whole file, read-only in memory: mapped (mmap; on Windows CreateFileMapping + MapViewOfFile),
// or read into one 64-byte-aligned buffer when built with ML_NO_MMAP (the WebAssembly build; an
// option everywhere) or when mapping fails. POSIX: file.cpp; Windows: file_win.cpp (paths are
// UTF-8, converted to UTF-16); both: file_common.cpp.
// Only regular files are inputs: a FIFO, a device, a socket or a directory is refused (ML_E_ARG)
// without blocking. Every file open here is listed (device and inode, path) until it is closed,
// so that an output (core/out_file.h) can refuse to replace a file the process is reading.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/status.h"

// Which file was opened, from fstat of the descriptor that was read (all 0 for a borrowed
// buffer). The pack cache records it to notice a model replaced or edited in place.
struct ml_file_id {
  uint64_t dev = 0, ino = 0;           // st_dev, st_ino
  uint64_t size = 0;                   // st_size
  int64_t mtime_ns = 0, ctime_ns = 0;  // st_mtim, st_ctim in nanoseconds since the epoch
};

struct ml_file {
  const uint8_t* data = nullptr;
  size_t size = 0;
  bool mapped = false;    // true: munmap on close
  bool borrowed = false;  // true: the caller owns data; close does not free it
  int input_slot = -1;    // its entry in the list of open inputs, or -1
  ml_file_id id;
};

// Opens path. Fails with ML_E_IO naming the path and the OS error, or ML_E_ARG when path is not a
// regular file (it names the path and what it is).
ml_status ml_file_open(ml_file* f, const char* path, ml_error* err);

// Wraps a caller-owned buffer (the wasm loader passes bytes it received); close does not free it.
void ml_file_borrow(ml_file* f, const void* data, size_t size);

// Takes a buffer from ml_aligned_alloc (core/aligned.h; a model converted at load). Where files can be mapped, the bytes move
// to an unlinked temporary file (ml_file_temp) that is mapped instead, and the buffer is freed,
// so packing can release the originals' pages as it does for a model read from disk; otherwise
// the buffer stays and close frees it with ml_aligned_free.
void ml_file_adopt(ml_file* f, void* data, size_t size);

// An unlinked temporary file in $TMPDIR (default /tmp), open for reading and writing, for a model
// converted at load to be written straight into (then ml_file_adopt_temp); -1 where there is none
// (the wasm build, which maps nothing; no O_TMPFILE support, no space, no TMPDIR).
int ml_file_temp();

// Writes n bytes of p to fd, retrying short writes and EINTR. ML_E_IO names what and the OS error.
ml_status ml_file_write_all(int fd, const void* p, size_t n, const char* what, ml_error* err);

// Takes fd (ml_file_temp's, holding size bytes from offset 0) into f: mapped read-only, or read
// into memory when mapping fails. Closes fd in every case. ML_E_IO / ML_E_NOMEM when neither works.
ml_status ml_file_adopt_temp(ml_file* f, int fd, size_t size, ml_error* err);

// Tells the OS the pages of [offset, offset + len) will not be read again (madvise DONTNEED on
// a mapping; a no-op otherwise). Used to release weights once they have been packed.
void ml_file_release(const ml_file* f, size_t offset, size_t len);

void ml_file_close(ml_file* f);

// Renames from over to, replacing a file at to (POSIX rename; Windows MoveFileExW with
// MOVEFILE_REPLACE_EXISTING, where the C runtime's rename refuses an existing target). UTF-8
// paths. true on success.
bool ml_file_replace(const char* from, const char* to);

// "a directory", "a FIFO", "a character device", ... for a stat mode that is not a regular file.
const char* ml_file_kind(unsigned mode);

// When a file with this device and inode is open through ml_file_open, copies its path (as it
// was opened, truncated to cap bytes) to path and returns true.
bool ml_file_find_input(unsigned long long dev, unsigned long long ino, char* path, size_t cap);
