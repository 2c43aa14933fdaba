// The part of core/file.h that does not depend on the OS: the list of open inputs, borrowed and
// owned buffers, the write loop and close. file.cpp (POSIX) and file_win.cpp (Windows) do the file
// access itself.
#include "core/file_common.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/aligned.h"
#include "core/file.h"

namespace {

// The open inputs: a fixed table under a spinlock (files are opened a few at a time, never in a
// hot path). A file opened while the table is full is simply not listed.
constexpr int MAX_INPUTS = 32;
constexpr size_t INPUT_PATH = 512;
struct input_entry {
  bool used;
  unsigned long long dev, ino;
  char path[INPUT_PATH];
};
input_entry g_inputs[MAX_INPUTS];
std::atomic_flag g_inputs_lock = ATOMIC_FLAG_INIT;

struct inputs_guard {
  inputs_guard() { while (g_inputs_lock.test_and_set(std::memory_order_acquire)) {} }
  ~inputs_guard() { g_inputs_lock.clear(std::memory_order_release); }
};

}  // namespace

int ml_file_input_add(uint64_t dev, uint64_t ino, const char* path) {
  inputs_guard g;
  for (int i = 0; i < MAX_INPUTS; ++i) {
    input_entry& e = g_inputs[i];
    if (e.used) continue;
    e.used = true;
    e.dev = (unsigned long long)dev;
    e.ino = (unsigned long long)ino;
    std::snprintf(e.path, sizeof e.path, "%s", path);
    return i;
  }
  return -1;
}

void ml_file_input_remove(int slot) {
  if (slot < 0 || slot >= MAX_INPUTS) return;
  inputs_guard g;
  g_inputs[slot].used = false;
}

bool ml_file_find_input(unsigned long long dev, unsigned long long ino, char* path, size_t cap) {
  inputs_guard g;
  for (const input_entry& e : g_inputs) {
    if (!e.used || e.dev != dev || e.ino != ino) continue;
    if (cap > 0) std::snprintf(path, cap, "%s", e.path);
    return true;
  }
  return false;
}

void ml_file_borrow(ml_file* f, const void* data, size_t size) {
  f->data = static_cast<const uint8_t*>(data);
  f->size = size;
  f->mapped = false;
  f->borrowed = true;
  f->input_slot = -1;
}

void ml_file_own(ml_file* f, const void* data, size_t size, bool mapped) {
  f->data = static_cast<const uint8_t*>(data);
  f->size = size;
  f->mapped = mapped;
  f->borrowed = false;
}

void ml_file_close(ml_file* f) {
  ml_file_input_remove(f->input_slot);
  if (f->data && !f->borrowed) {
    if (f->mapped) ml_file_unmap(f);
    else ml_aligned_free(const_cast<uint8_t*>(f->data));
  }
  *f = ml_file{};
}

bool ml_fd_write_all(int fd, const void* p, size_t n, size_t* done, int* e) {
  *done = 0;
  while (*done < n) {
    const long w = ml_fd_write(fd, static_cast<const uint8_t*>(p) + *done, n - *done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      *e = w < 0 ? errno : EIO;
      return false;
    }
    *done += (size_t)w;
  }
  return true;
}

ml_status ml_file_write_all(int fd, const void* p, size_t n, const char* what, ml_error* err) {
  size_t done = 0;
  int e = 0;
  if (!ml_fd_write_all(fd, p, n, &done, &e))
    return ml_fail(err, ML_E_IO, "cannot write %s at byte %zu: %s", what, done, std::strerror(e));
  return ML_OK;
}
