// POSIX file access (core/file.h); Windows has file_win.cpp, and file_common.cpp holds the rest.
#include "core/file.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#if !ML_NO_MMAP
#include <sys/mman.h>
#endif

#include "core/aligned.h"
#include "core/file_common.h"

namespace {

ml_status read_all(int fd, const char* path, size_t size, ml_file* f, ml_error* err) {
  uint8_t* buf = static_cast<uint8_t*>(ml_aligned_alloc(64, size));
  if (!buf) return ml_fail(err, ML_E_NOMEM, "%s: cannot allocate %zu bytes to read it", path, size);
  size_t got = 0;
  while (got < size) {
    const ssize_t r = ::read(fd, buf + got, size - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      ml_aligned_free(buf);
      return ml_fail(err, ML_E_IO, "%s: read failed at byte %zu: %s", path, got,
                     r == 0 ? "unexpected end of file" : std::strerror(errno));
    }
    got += static_cast<size_t>(r);
  }
  ml_file_own(f, buf, size, false);
  return ML_OK;
}

// Maps the first size bytes of fd read-only into f (which then owns the mapping); false when
// size is 0, mapping fails or the build maps nothing. fd stays open.
bool map_fd(ml_file* f, int fd, size_t size) {
#if !ML_NO_MMAP
  if (size == 0) return false;
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (p == MAP_FAILED) return false;
  ml_file_own(f, p, size, true);
  return true;
#else
  (void)f; (void)fd; (void)size;
  return false;
#endif
}

void capture_id(ml_file_id* id, const struct stat& st) {
  id->dev = (uint64_t)st.st_dev;
  id->ino = (uint64_t)st.st_ino;
  id->size = (uint64_t)st.st_size;
  id->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
  id->ctime_ns = (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec;
}

}  // namespace

ml_status ml_file_open(ml_file* f, const char* path, ml_error* err) {
  *f = ml_file{};
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, before fstat
  // could refuse it. It is cleared again for the regular file that remains.
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return ml_fail(err, ML_E_IO, "%s: cannot open: %s", path, std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return ml_fail(err, ML_E_IO, "%s: cannot stat: %s", path, std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return ml_fail(err, ML_E_ARG, "%s: is %s, not a regular file", path, ml_file_kind(st.st_mode));
  }
  const int fl = ::fcntl(fd, F_GETFL);
  if (fl >= 0) ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  if ((unsigned long long)st.st_size > (unsigned long long)SIZE_MAX) {
    ::close(fd);
    return ml_fail(err, ML_E_NOMEM, "%s: %lld bytes do not fit in this address space", path, (long long)st.st_size);
  }
  const size_t size = static_cast<size_t>(st.st_size);
  capture_id(&f->id, st);
  ml_status s = ML_OK;
#if !ML_NO_MMAP
  if (size > 0) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p != MAP_FAILED) {
      ml_file_own(f, p, size, true);
      ::close(fd);
      f->input_slot = ml_file_input_add((uint64_t)st.st_dev, (uint64_t)st.st_ino, path);
      return ML_OK;
    }
  }
#endif
  s = read_all(fd, path, size, f, err);
  ::close(fd);
  if (s == ML_OK) f->input_slot = ml_file_input_add((uint64_t)st.st_dev, (uint64_t)st.st_ino, path);
  return s;
}

void ml_file_adopt(ml_file* f, void* data, size_t size) {
  ml_file_borrow(f, data, size);
  f->borrowed = false;  // close frees it
  // An unlinked temporary file, mapped: its pages can be dropped once packed and reread when
  // needed, like a model opened from disk. Without one (no space, no TMPDIR) the buffer stays.
  if (size == 0) return;
  const int fd = ml_file_temp();
  if (fd < 0) return;
  const bool mapped = ml_file_write_all(fd, data, size, "the temporary file", nullptr) == ML_OK && map_fd(f, fd, size);
  ::close(fd);
  if (mapped) ml_aligned_free(data);
}

int ml_file_temp() {
#if ML_NO_MMAP
  return -1;
#else
  const char* dir = std::getenv("TMPDIR");
  return ::open(dir && *dir ? dir : "/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
#endif
}

long ml_fd_write(int fd, const void* p, size_t n) { return (long)::write(fd, p, n); }

ml_status ml_file_adopt_temp(ml_file* f, int fd, size_t size, ml_error* err) {
  *f = ml_file{};
  if (map_fd(f, fd, size)) {
    ::close(fd);
    return ML_OK;
  }
  ml_status s = ML_OK;
  if (::lseek(fd, 0, SEEK_SET) != 0)
    s = ml_fail(err, ML_E_IO, "the temporary file: cannot seek: %s", std::strerror(errno));
  if (s == ML_OK) s = read_all(fd, "the temporary file", size, f, err);
  ::close(fd);
  return s;
}

void ml_file_release(const ml_file* f, size_t offset, size_t len) {
#if !ML_NO_MMAP
  if (!f->mapped || len == 0) return;  // heap pages would lose their contents
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t a = reinterpret_cast<uintptr_t>(f->data) + offset;
  const uintptr_t begin = (a + page - 1) / page * page;  // whole pages inside the range only
  const uintptr_t end = (a + len) / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
#else
  (void)f; (void)offset; (void)len;
#endif
}

void ml_file_unmap(const ml_file* f) {
#if !ML_NO_MMAP
  ::munmap(const_cast<uint8_t*>(f->data), f->size);
#else
  (void)f;
#endif
}

bool ml_file_replace(const char* from, const char* to) { return std::rename(from, to) == 0; }

const char* ml_file_kind(unsigned mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISREG(mode)) return "a regular file";
  return "a special file";
}
