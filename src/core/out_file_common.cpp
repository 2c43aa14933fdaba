// The part of core/out_file.h that does not depend on the OS (core/out_file_common.h): the
// signal handler's table, the buffered writes and the discard. out_file.cpp (POSIX) and
// out_file_win.cpp (Windows) open, rename and install the handler.
#include "core/out_file_common.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/file_common.h"

namespace {

// ---- The signal handler's table ---------------------------------------------------------------
// A slot is free (0), being filled (1) or ready (2). The handler reads only ready slots, whose
// path was completely written before the release store that made them ready.
constexpr int MAX_CLEANUP = 16;
enum { SLOT_FREE = 0, SLOT_FILLING = 1, SLOT_READY = 2 };
struct cleanup_slot {
  std::atomic<int> state;
  char path[ML_OUT_PATH_MAX];
};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs lock-free atomics");
cleanup_slot g_cleanup[MAX_CLEANUP];

bool flush(ml_out_file* o, int* e) {
  size_t done = 0;
  const bool ok = ml_fd_write_all(o->fd, o->buf, o->fill, &done, e);
  o->fill = 0;
  return ok;
}

ml_status sticky_or_closed(const ml_out_file* o, ml_error* err) {
  if (o->error) return ml_fail(err, ML_E_IO, "cannot write %s: %s", o->path, std::strerror(o->error));
  if (o->fd < 0) return ml_fail(err, ML_E_ARG, "%s: the output is not open", o->path);
  return ML_OK;
}

}  // namespace

int ml_cleanup_add(const char* path) {
  const size_t n = std::strlen(path);
  if (n >= ML_OUT_PATH_MAX) return -1;
  for (int i = 0; i < MAX_CLEANUP; ++i) {
    int expect = SLOT_FREE;
    if (!g_cleanup[i].state.compare_exchange_strong(expect, SLOT_FILLING, std::memory_order_acquire)) continue;
    std::memcpy(g_cleanup[i].path, path, n + 1);
    g_cleanup[i].state.store(SLOT_READY, std::memory_order_release);
    return i;
  }
  return -1;
}

void ml_cleanup_remove(int slot) {
  if (slot >= 0 && slot < MAX_CLEANUP) g_cleanup[slot].state.store(SLOT_FREE, std::memory_order_release);
}

void ml_cleanup_remove_listed() {
  for (cleanup_slot& s : g_cleanup)
    if (s.state.load(std::memory_order_acquire) == SLOT_READY) ml_out_os_remove(s.path);
}

bool ml_out_copy_path(char* dst, const char* src) {
  const size_t n = std::strlen(src);
  if (n + 32 >= ML_OUT_PATH_MAX) return false;  // room for ".tmp.<pid>.<k>"
  std::memcpy(dst, src, n + 1);
  return true;
}

bool ml_out_tmp_name(ml_out_file* o, unsigned long pid, int k) {
  const int n = k == 0 ? std::snprintf(o->tmp, sizeof o->tmp, "%s.tmp.%lu", o->path, pid)
                       : std::snprintf(o->tmp, sizeof o->tmp, "%s.tmp.%lu.%d", o->path, pid, k);
  return n > 0 && (size_t)n < sizeof o->tmp;
}

ml_status ml_out_fail_write(ml_out_file* o, int e, ml_error* err) {
  ml_out_discard(o);
  o->error = e;
  return ml_fail(err, ML_E_IO, "cannot write %s: %s", o->path, std::strerror(e));
}

ml_status ml_out_write(ml_out_file* o, const void* data, size_t n, ml_error* err) {
  ML_TRY(sticky_or_closed(o, err));
  const uint8_t* p = static_cast<const uint8_t*>(data);
  int e = 0;
  if (o->fill + n > ML_OUT_BUF_SIZE && !flush(o, &e)) return ml_out_fail_write(o, e, err);
  if (n >= ML_OUT_BUF_SIZE) {
    size_t done = 0;
    if (!ml_fd_write_all(o->fd, p, n, &done, &e)) return ml_out_fail_write(o, e, err);
  } else if (n > 0) {
    std::memcpy(o->buf + o->fill, p, n);
    o->fill += n;
  }
  o->written += n;
  return ML_OK;
}

ml_status ml_out_flush_close(ml_out_file* o, ml_error* err) {
  ML_TRY(sticky_or_closed(o, err));
  int e = 0;
  if (!flush(o, &e)) return ml_out_fail_write(o, e, err);
  if (ml_out_os_sync(o->fd) != 0) return ml_out_fail_write(o, errno, err);
  const int fd = o->fd;
  o->fd = -1;
  if (ml_out_os_close(fd) != 0) return ml_out_fail_write(o, errno, err);
  return ML_OK;
}

void ml_out_committed(ml_out_file* o) {
  o->tmp[0] = 0;
  ml_cleanup_remove(o->cleanup_slot);
  o->cleanup_slot = -1;
  std::free(o->buf);
  o->buf = nullptr;
}

void ml_out_discard(ml_out_file* o) {
  if (o->fd >= 0) ml_out_os_close(o->fd);
  o->fd = -1;
  if (o->tmp[0]) ml_out_os_remove(o->tmp);  // before the table entry goes, so a signal cannot miss it
  o->tmp[0] = 0;
  ml_cleanup_remove(o->cleanup_slot);
  o->cleanup_slot = -1;
  std::free(o->buf);
  o->buf = nullptr;
  o->fill = 0;
}
