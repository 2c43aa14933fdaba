// The platform-neutral part of core/file.h, shared by file.cpp (POSIX) and file_win.cpp: the list
// of open inputs that core/out_file.h checks an output against. A file is named by its device and
// inode (POSIX st_dev, st_ino; Windows: the volume serial number and the file index).
#pragma once
#include <cstdint>

// Lists path as open with this identity; returns its slot, or -1 when the table is full (the
// file is then simply not listed).
int ml_file_input_add(uint64_t dev, uint64_t ino, const char* path);
// Takes the slot back; -1 is ignored.
void ml_file_input_remove(int slot);
