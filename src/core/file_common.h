// The platform-neutral part of core/file.h, shared by file.cpp (POSIX) and file_win.cpp: the list
// of open inputs that core/out_file.h checks an output against, the write loop, and what close
// and a successful read or map leave in an ml_file. A file is named by its device and inode
// (POSIX st_dev, st_ino; Windows: the volume serial number and the file index).
#pragma once
#include <cstddef>
#include <cstdint>

struct ml_file;

// ---- Per platform (file.cpp, file_win.cpp) ----
// One write(2) / _write of at most n bytes: the count written, or -1 with errno set.
long ml_fd_write(int fd, const void* p, size_t n);
// munmap / UnmapViewOfFile of f's mapping.
void ml_file_unmap(const ml_file* f);

// ---- Shared (file_common.cpp) ----
// Writes n bytes of p to fd, retrying short writes and EINTR. false with *e = the errno (EIO for
// a write of nothing) and *done = the bytes written before it.
bool ml_fd_write_all(int fd, const void* p, size_t n, size_t* done, int* e);
// f owns data (size bytes): mapped (unmapped on close) or from ml_aligned_alloc (freed on close).
void ml_file_own(ml_file* f, const void* data, size_t size, bool mapped);

// Lists path as open with this identity; returns its slot, or -1 when the table is full (the
// file is then simply not listed).
int ml_file_input_add(uint64_t dev, uint64_t ino, const char* path);
// Takes the slot back; -1 is ignored.
void ml_file_input_remove(int slot);
