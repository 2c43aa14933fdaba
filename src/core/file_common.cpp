// The part of core/file.h that does not depend on the OS: the list of open inputs and borrowed
// buffers. file.cpp (POSIX) and file_win.cpp (Windows) do the file access itself.
#include "core/file_common.h"

#include <atomic>
#include <cstdio>

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
